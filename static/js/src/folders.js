// A folder's page: drag-and-drop upload to the API, live indexing progress
// over the folder's websocket; the file viewer scrolls to its highlight.
import { liveSocket } from "./lib/live.js";
import { requestJson } from "./lib/request.js";

const summary = document.querySelector("[data-folder-progress-url]");

function setBar(bar, percent) {
  bar.style.width = `${percent}%`;
  bar.classList.toggle("done", percent >= 100);
}

// A new file's row; it takes its place in the tree in placeRows.
function fileRow(file, tree) {
  tree.querySelector("[data-tree-empty]")?.remove();
  const row = document.createElement("li");
  row.dataset.fileId = file.id;
  row.dataset.path = file.path;
  row.style.setProperty("--depth", file.path.split("/").length - 1);
  const link = document.createElement("a");
  link.href = `${summary.dataset.fileUrl}${file.id}/`;
  link.textContent = file.path.split("/").pop();
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
  return row;
}

// The tree as the server draws it: files by path, each directory's row
// before its first file.
function placeRows(tree) {
  const files = [...tree.querySelectorAll("[data-file-id]")].sort((a, b) =>
    a.dataset.path < b.dataset.path ? -1 : a.dataset.path > b.dataset.path ? 1 : 0,
  );
  const dirs = new Map([...tree.querySelectorAll("[data-dir]")].map((row) => [row.dataset.dir, row]));
  const placed = new Set();
  for (const file of files) {
    const parts = file.dataset.path.split("/");
    for (let depth = 0; depth < parts.length - 1; depth++) {
      const path = parts.slice(0, depth + 1).join("/");
      if (placed.has(path)) continue;
      let row = dirs.get(path);
      if (!row) {
        row = document.createElement("li");
        row.className = "tree-dir";
        row.dataset.dir = path;
        row.style.setProperty("--depth", depth);
        row.textContent = `${parts[depth]}/`;
      }
      tree.append(row);
      placed.add(path);
    }
    tree.append(file);
  }
}

function showFiles(files) {
  const tree = document.querySelector("[data-tree]");
  let added = false;
  for (const file of files) {
    let row = tree.querySelector(`[data-file-id="${file.id}"]`);
    if (!row) {
      row = fileRow(file, tree);
      tree.append(row);
      added = true;
    }
    const state = row.querySelector("[data-file-state]");
    state.textContent = file.label;
    state.classList.toggle("badge-ok", file.label === "ready");
    setBar(row.querySelector("[data-file-bar]"), file.percent);
    row.querySelector("[data-file-percent]").textContent = `${file.percent}%`;
  }
  if (added) placeRows(tree);
}

// The server words the folder's state (counts.summary) and each file's
// (file.label) the same way, on the page and in every progress message.
function showFolder(counts) {
  summary.querySelector("[data-folder-counts]").textContent = counts.summary;
  setBar(summary.querySelector("[data-folder-bar]"), counts.percent);
  summary.querySelector("[data-folder-percent]").textContent = `${counts.percent}%`;
}

async function refresh() {
  const api = summary.dataset.folderApi;
  const [folder, files] = await Promise.all([
    requestJson(api),
    requestJson(`${api}/files`),
  ]);
  showFolder(folder.counts);
  showFiles(files);
}

// A file inside a directory whose path has a part starting with "." (.git,
// .DS_Store) is left out, as local folders leave it out of a rescan.
function hidden(path) {
  return path.includes("/") && path.split("/").some((part) => part.startsWith("."));
}

function readEntries(reader) {
  return new Promise((resolve, reject) => reader.readEntries(resolve, reject));
}

// [file, path] pairs of a dropped entry; a directory is walked, each file
// keeping its path below the drop ("notes/2024/a.md").
async function entryFiles(entry, out) {
  if (entry.isFile) {
    const file = await new Promise((resolve, reject) => entry.file(resolve, reject));
    out.push([file, entry.fullPath.replace(/^\/+/, "")]);
  } else if (entry.isDirectory) {
    const reader = entry.createReader();
    // readEntries answers in batches, then with none.
    for (let batch = await readEntries(reader); batch.length; batch = await readEntries(reader)) {
      for (const child of batch) await entryFiles(child, out);
    }
  }
}

async function droppedFiles(transfer) {
  // The drop's items are readable only during the event: take every entry
  // and file before the first await.
  const items = [...transfer.items].filter((item) => item.kind === "file");
  const taken = items.map((item) => [item.webkitGetAsEntry?.(), item.getAsFile()]);
  const out = [];
  for (const [entry, file] of taken) {
    if (entry) await entryFiles(entry, out);
    else if (file) out.push([file, file.name]);
  }
  return out;
}

async function sendBatch(pairs) {
  const body = new FormData();
  for (const [file, path] of pairs) body.append("files", file, path);
  const result = await requestJson(`${summary.dataset.folderApi}/files`, { method: "POST", body });
  return result.changes;
}

// Uploads [file, path] pairs in requests of at most the server's file
// count per request; each request is stored whole or not at all.
async function upload(pairs) {
  const status = document.querySelector("[data-upload-status]");
  const kept = pairs.filter(([, path]) => !hidden(path));
  const skipped = pairs.length - kept.length;
  if (!kept.length) {
    if (skipped) status.textContent = `Only hidden files (${skipped}); nothing uploaded.`;
    return;
  }
  status.classList.remove("error-text");
  const size = Number(dropzone.dataset.maxFiles) || 100;
  const counts = {};
  let sent = 0;
  try {
    for (; sent < kept.length; sent += size) {
      const batch = kept.slice(sent, sent + size);
      status.textContent =
        kept.length > size
          ? `Uploading files ${sent + 1}–${sent + batch.length} of ${kept.length}…`
          : `Uploading ${kept.length} file(s)…`;
      for (const change of await sendBatch(batch)) {
        counts[change.status] = (counts[change.status] || 0) + 1;
      }
    }
  } catch (error) {
    status.textContent = sent ? `${error.message} (${sent} files before it were stored)` : error.message;
    status.classList.add("error-text");
    await refresh();
    return;
  }
  const parts = Object.entries(counts).map(([what, n]) => `${n} ${what}`);
  if (skipped) parts.push(`${skipped} hidden skipped`);
  status.textContent = parts.join(", ");
  await refresh();
}

function listen() {
  liveSocket(summary.dataset.folderProgressUrl).listen({
    onStatus: (status) => {
      summary.dataset.live = status;
    },
    onMessage: (message) => {
      if (message.type !== "folder.progress") return;
      showFolder(message.folder);
      showFiles(message.files);
    },
  });
}

const dropzone = document.querySelector("[data-dropzone]");
if (dropzone) {
  const input = dropzone.querySelector("[data-file-input]");
  const folderInput = dropzone.querySelector("[data-folder-input]");
  dropzone.addEventListener("dragover", (event) => {
    event.preventDefault();
    dropzone.classList.add("over");
  });
  dropzone.addEventListener("dragleave", () => dropzone.classList.remove("over"));
  dropzone.addEventListener("drop", (event) => {
    event.preventDefault();
    dropzone.classList.remove("over");
    droppedFiles(event.dataTransfer).then(upload);
  });
  dropzone.addEventListener("submit", (event) => event.preventDefault());
  // Each input is emptied once read, so choosing the same again uploads again.
  input.addEventListener("change", () => {
    const pairs = [...input.files].map((file) => [file, file.name]);
    input.value = "";
    upload(pairs);
  });
  folderInput.addEventListener("change", () => {
    const pairs = [...folderInput.files].map((file) => [file, file.webkitRelativePath || file.name]);
    folderInput.value = "";
    upload(pairs);
  });
}
if (summary) listen();

const viewer = document.querySelector("[data-first-hit]");
if (viewer) document.getElementById(`L${viewer.dataset.firstHit}`)?.scrollIntoView({ block: "center" });
