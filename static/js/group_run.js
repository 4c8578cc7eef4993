// The run viewer: follows a run's GroupResponseEvents live over /ws/groups/.
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

function connect(attempt = 0) {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}/ws/groups/`);
  socket.addEventListener("open", () => {
    dot.className = "dot dot-on";
    attempt = 0;
    socket.send(
      JSON.stringify({ type: "run.watch", run_id: Number(list.dataset.runId), after }),
    );
  });
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(event.data);
    if (message.type === "run.event" && message.seq > after) {
      after = message.seq;
      render(message);
    }
  });
  socket.addEventListener("close", () => {
    dot.className = "dot dot-off";
    if (!finished) {
      setTimeout(() => connect(attempt + 1), Math.min(1000 * 2 ** attempt, 15000));
    }
  });
}

if (list) connect();
