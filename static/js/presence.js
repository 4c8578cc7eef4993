// Shows who else is looking at this constellation, live, over a websocket.
const box = document.querySelector("[data-presence-url]");

function connect(attempt = 0) {
  const dot = box.querySelector("[data-presence-dot]");
  const label = box.querySelector("[data-presence-label]");
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const socket = new WebSocket(`${scheme}://${location.host}${box.dataset.presenceUrl}`);
  const here = new Set();

  const render = () => {
    const others = [...here];
    label.textContent = others.length ? `Here now: ${others.join(", ")}` : "Live";
  };

  socket.addEventListener("open", () => {
    dot.className = "dot dot-on";
    label.textContent = "Live";
    attempt = 0;
    socket.send(JSON.stringify({ type: "presence.ping" }));
  });
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(event.data);
    if (message.type === "presence.joined" || message.type === "presence.here") {
      here.add(message.user);
    } else if (message.type === "presence.left") {
      here.delete(message.user);
    }
    render();
  });
  socket.addEventListener("close", () => {
    dot.className = "dot dot-off";
    label.textContent = "Offline — reconnecting…";
    setTimeout(() => connect(attempt + 1), Math.min(1000 * 2 ** attempt, 15000));
  });
}

if (box) connect();
