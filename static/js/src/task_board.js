// The task board: drag a card to a column to change the task's status through
// the tool API; changes made anywhere arrive over the constellation's socket
// and the changed card is re-rendered by the server.
import { liveSocket } from "./lib/live.js";
import { request, requestText, showError } from "./lib/request.js";

const board = document.querySelector("[data-task-board]");
const errorBox = document.querySelector("[data-board-error]");

const cardUrl = (taskId) => board.dataset.cardUrl.replace("/0/", `/${taskId}/`);

// Finished columns list only their latest cards, so counts move by one.
function count(status, delta) {
  const label = board.querySelector(`[data-column="${status}"] [data-column-count]`);
  label.textContent = Number(label.textContent) + delta;
}

// Put the server's rendering of a task in the column of its status.  The
// whole rendering is read before the old card goes, so the swap happens in
// one step and the card never vanishes from the board meanwhile.
async function refreshCard(taskId) {
  let html;
  try {
    html = (await requestText(cardUrl(taskId))).trim();
  } catch (error) {
    // A task that is gone (or no longer visible) leaves the board.
    if (error.status !== 404) {
      showError(errorBox, error);
      return;
    }
    html = "";
  }
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
  try {
    await request(`${board.dataset.apiUrl}${taskId}/status`, {
      method: "POST",
      json: { status, reason },
    });
    showError(errorBox, null);
  } catch (error) {
    showError(errorBox, error);
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

// The constellation's socket, shared with the presence panel of the page.
function listen() {
  const box = document.querySelector("[data-presence-url]");
  liveSocket(box.dataset.presenceUrl).listen({
    onStatus: (status) => {
      board.dataset.live = String(status === "on");
    },
    onMessage: (message) => {
      if (message.type === "task.changed") refreshCard(message.task_id);
    },
  });
}

if (board) listen();
