// Shows who else is looking at this constellation, live, over its socket
// (shared with the other scripts of the page that follow the constellation).
import { liveSocket, statusShower } from "./lib/live.js";

const box = document.querySelector("[data-presence-url]");

function listen() {
  const label = box.querySelector("[data-presence-label]");
  const showStatus = statusShower(box.querySelector("[data-presence-dot]"), label);
  const here = new Set();
  const render = () => {
    if (here.size) label.textContent = `Here now: ${[...here].join(", ")}`;
  };
  liveSocket(box.dataset.presenceUrl).listen({
    // Who is here is asked again on every connection: a reconnected page
    // missed the joins and leaves of its time away.
    onOpen: (socket) => {
      here.clear();
      socket.send({ type: "presence.ping" });
    },
    onStatus: (status) => {
      showStatus(status);
      if (status === "on") render();
    },
    onMessage: (message) => {
      if (message.type === "presence.joined" || message.type === "presence.here") {
        here.add(message.user);
      } else if (message.type === "presence.left") {
        here.delete(message.user);
      } else {
        return;
      }
      label.textContent = "Live";
      render();
    },
  });
}

if (box) listen();
