// The run viewer: follows a run's GroupResponseEvents live over /ws/groups/.
import { liveSocket, statusShower } from "./lib/live.js";

const list = document.querySelector("[data-run-events]");
const dot = document.querySelector("[data-live-dot]");
const status = document.querySelector("[data-run-status]");
let after = Number(list?.dataset.after || 0);
let finished = false;

function render(message) {
  const item = document.createElement("li");
  item.className = `event event-${message.event.toLowerCase()}`;
  const badge = document.createElement("span");
  badge.className = "badge";
  badge.textContent = message.event;
  const body = document.createElement("code");
  body.textContent = JSON.stringify(message.data);
  item.append(badge, " ", body);
  list.append(item);
  if (message.event === "Complete") {
    status.textContent = "completed";
    finished = true;
  } else if (message.event === "Error" && message.data.recoverable === false) {
    status.textContent = "failed";
    finished = true;
  }
}

function listen() {
  const showStatus = statusShower(dot);
  const stop = liveSocket("/ws/groups/").listen({
    onStatus: showStatus,
    // Watching again after a reconnection asks for the events after the
    // last one shown, so none is missed or shown twice.
    onOpen: (socket) => {
      socket.send({ type: "run.watch", run_id: Number(list.dataset.runId), after });
    },
    onMessage: (message) => {
      if (message.type !== "run.event" || message.seq <= after) return;
      after = message.seq;
      render(message);
      if (finished) {
        stop();
        showStatus("off");
      }
    },
  });
}

if (list) listen();
