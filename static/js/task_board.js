// The task board: drag a card to a column to change the task's status through
// the tool API; changes made anywhere arrive over the constellation's socket
// and the changed card is re-rendered by the server.
const board = document.querySelector("[data-task-board]");
const errorBox = document.querySelector("[data-board-error]");

const csrfToken = () => board.querySelector("input[name=csrfmiddlewaretoken]").value;
const cardUrl = (taskId) => board.dataset.cardUrl.replace("/0/", `/${taskId}/`);

function showError(message) {
  errorBox.textContent = message;
  errorBox.hidden = !message;
}

// Finished columns list only their latest cards, so counts move by one.
function count(status, delta) {
  const label = board.querySelector(`[data-column="${status}"] [data-column-count]`);
  label.textContent = Number(label.textContent) + delta;
}

// Put the server's rendering of a task in the column of its status.  The
// whole rendering is read before the old card goes, so the swap happens in
// one step and the card never vanishes from the board meanwhile.
async function refreshCard(taskId) {
  const response = await fetch(cardUrl(taskId), { credentials: "same-origin" });
  const html = response.ok ? (await response.text()).trim() : "";
  const old = board.querySelector(`[data-task-card][data-task-id="${taskId}"]`);
  if (old) {
    count(old.dataset.status, -1);
    old.remove();
  }
  if (!html) return;
  const template = document.createElement("template");
  template.innerHTML = html;
  const card = template.content.firstElementChild;
  const column = board.querySelector(`[data-column="${card.dataset.status}"] [data-cards]`);
  column.prepend(card);
  count(card.dataset.status, 1);
}

async function moveTask(taskId, status) {
  let reason = "";
  if (status === "blocked") {
    reason = window.prompt("Why is this task blocked?") || "";
    if (!reason.trim()) return;
  }
  const response = await fetch(`${board.dataset.apiUrl}${taskId}/status`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
    body: JSON.stringify({ status, reason }),
  });
  if (response.ok) {
    showError("");
  } else {
    const body = await response.json().catch(() => ({}));
    showError(body.detail || `Could not move the task (HTTP ${response.status}).`);
  }
  await refreshCard(taskId);
}

board.addEventListener("dragstart", (event) => {
  const card = event.target.closest("[data-task-card]");
  if (!card) return;
  card.classList.add("dragging");
  event.dataTransfer.setData("text/plain", card.dataset.taskId);
  event.dataTransfer.effectAllowed = "move";
});
board.addEventListener("dragend", (event) => {
  event.target.closest("[data-task-card]")?.classList.remove("dragging");
});
for (const column of board.querySelectorAll("[data-column]")) {
  column.addEventListener("dragover", (event) => {
    event.preventDefault();
    column.classList.add("drop-target");
  });
  column.addEventListener("dragleave", () => column.classList.remove("drop-target"));
  column.addEventListener("drop", (event) => {
    event.preventDefault();
    column.classList.remove("drop-target");
    const taskId = event.dataTransfer.getData("text/plain");
    const card = board.querySelector(`[data-task-card][data-task-id="${taskId}"]`);
    if (card && card.dataset.status !== column.dataset.column) {
      moveTask(taskId, column.dataset.column);
    }
  });
}

function listen(attempt = 0) {
  const box = document.querySelector("[data-presence-url]");
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}${box.dataset.presenceUrl}`);
  socket.addEventListener("open", () => {
    attempt = 0;
    board.dataset.live = "true";
  });
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(event.data);
    if (message.type === "task.changed") refreshCard(message.task_id);
  });
  socket.addEventListener("close", () => {
    board.dataset.live = "false";
    setTimeout(() => listen(attempt + 1), Math.min(1000 * 2 ** attempt, 15000));
  });
}

if (board) listen();
