// The run viewer: follows a run's events live over /ws/groups/ and, for
// each, draws the conversation again from the server (the one place that
// joins streamed pieces, counts votes and orders stages).  Events arriving
// while a drawing is on its way are answered by one more drawing after it.
import { liveSocket, statusShower } from "./lib/live.js";

const view = document.querySelector("[data-run-conversation]");
const dot = document.querySelector("[data-live-dot]");
const status = document.querySelector("[data-run-status]");
let after = Number(view?.dataset.after || 0);
let finished = false;
let drawing = null;
let again = false;

async function draw() {
  if (drawing) {
    again = true;
    return drawing;
  }
  drawing = (async () => {
    do {
      again = false;
      const response = await fetch(view.dataset.url, { credentials: "same-origin" });
      if (!response.ok) break;
      const html = await response.text();
      // Tool calls someone opened stay open.
      const open = new Set(
        [...view.querySelectorAll("details[open][data-key]")].map((d) => d.dataset.key),
      );
      view.innerHTML = html;
      for (const details of view.querySelectorAll("details[data-key]")) {
        if (open.has(details.dataset.key)) details.open = true;
      }
      view.dataset.shown = String(after);
    } while (again);
  })();
  try {
    await drawing;
  } finally {
    drawing = null;
  }
}

function settle(message) {
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
      socket.send({ type: "run.watch", run_id: Number(view.dataset.runId), after });
    },
    onMessage: (message) => {
      if (message.type !== "run.event" || message.seq <= after) return;
      after = message.seq;
      settle(message);
      draw();
      if (finished) {
        stop();
        showStatus("off");
      }
    },
  });
}

if (view) listen();
