// A folder's page: drag-and-drop upload to the API, live indexing progress
// over the folder's websocket; the file viewer scrolls to its highlight.
const summary = document.querySelector("[data-folder-progress-url]");

function csrfToken() {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

function setBar(bar, percent) {
  bar.style.width = `${percent}%`;
  bar.classList.toggle("done", percent >= 100);
}

function fileRow(file) {
  const tree = document.querySelector("[data-tree]");
  let row = tree.querySelector(`[data-file-id="${file.id}"]`);
  if (row) return row;
  tree.querySelector("[data-tree-empty]")?.remove();
  row = document.createElement("li");
  row.dataset.fileId = file.id;
  row.style.setProperty("--depth", file.path.split("/").length - 1);
  const link = document.createElement("a");
  link.href = `${summary.dataset.fileUrl}${file.id}/`;
  link.textContent = file.path;
  link.title = file.path;
  const state = document.createElement("span");
  state.className = "badge";
  state.dataset.fileState = "";
  const progress = document.createElement("div");
  progress.className = "progress progress-small";
  const bar = document.createElement("div");
  bar.className = "progress-bar";
  bar.dataset.fileBar = "";
  progress.append(bar);
  const percent = document.createElement("span");
  percent.className = "muted";
  percent.dataset.filePercent = "";
  row.className = "tree-file";
  row.append(link, state, progress, percent);
  tree.append(row);
  return row;
}

function showFile(file) {
  const row = fileRow(file);
  row.querySelector("[data-file-state]").textContent = file.state ?? file.index_state;
  setBar(row.querySelector("[data-file-bar]"), file.percent);
  row.querySelector("[data-file-percent]").textContent = `${file.percent}%`;
}

function showFolder(counts) {
  const done = counts.passages ? Math.floor((100 * counts.embedded) / counts.passages) : 100;
  const percent = counts.files ? Math.min(done, 100) : 100;
  summary.querySelector("[data-folder-counts]").textContent =
    `${counts.files} files · ${counts.passages} passages · ${counts.pending} pending`;
  setBar(summary.querySelector("[data-folder-bar]"), percent);
  summary.querySelector("[data-folder-percent]").textContent = `${percent}%`;
}

async function refresh() {
  const api = summary.dataset.folderApi;
  const [folder, files] = await Promise.all([
    fetch(api, { credentials: "same-origin" }).then((r) => r.json()),
    fetch(`${api}/files`, { credentials: "same-origin" }).then((r) => r.json()),
  ]);
  showFolder(folder.counts);
  files.forEach(showFile);
}

async function upload(files) {
  const status = document.querySelector("[data-upload-status]");
  if (!files.length) return;
  const body = new FormData();
  for (const file of files) body.append("files", file, file.name);
  status.textContent = `Uploading ${files.length} file(s)…`;
  const response = await fetch(`${summary.dataset.folderApi}/files`, {
    method: "POST",
    body,
    credentials: "same-origin",
    headers: { "X-CSRFToken": csrfToken() },
  });
  const result = await response.json();
  if (!response.ok) {
    status.textContent = result.detail || `Upload failed (${response.status})`;
    status.classList.add("error-text");
    return;
  }
  const counts = {};
  for (const change of result.changes) counts[change.status] = (counts[change.status] || 0) + 1;
  status.textContent = Object.entries(counts)
    .map(([what, n]) => `${n} ${what}`)
    .join(", ");
  await refresh();
}

function listen(attempt = 0) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}${summary.dataset.folderProgressUrl}`);
  socket.addEventListener("open", () => {
    attempt = 0;
    summary.dataset.live = "on";
  });
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(event.data);
    if (message.type !== "folder.progress") return;
    showFolder(message.folder);
    message.files.forEach(showFile);
  });
  socket.addEventListener("close", () => {
    summary.dataset.live = "off";
    setTimeout(() => listen(attempt + 1), Math.min(1000 * 2 ** attempt, 15000));
  });
}

const dropzone = document.querySelector("[data-dropzone]");
if (dropzone) {
  const input = dropzone.querySelector("[data-file-input]");
  dropzone.addEventListener("dragover", (event) => {
    event.preventDefault();
    dropzone.classList.add("over");
  });
  dropzone.addEventListener("dragleave", () => dropzone.classList.remove("over"));
  dropzone.addEventListener("drop", (event) => {
    event.preventDefault();
    dropzone.classList.remove("over");
    upload([...event.dataTransfer.files]);
  });
  dropzone.addEventListener("submit", (event) => event.preventDefault());
  input.addEventListener("change", () => upload([...input.files]));
}
if (summary) listen();

for (const form of document.querySelectorAll("form[data-confirm]")) {
  form.addEventListener("submit", (event) => {
    if (!window.confirm(form.dataset.confirm)) event.preventDefault();
  });
}

const viewer = document.querySelector("[data-first-hit]");
if (viewer) document.getElementById(`L${viewer.dataset.firstHit}`)?.scrollIntoView({ block: "center" });
