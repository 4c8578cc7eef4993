// Live sockets of dashboard pages: one WebSocket per URL per page, shared by
// every listener on the page (a registry keyed by URL), reconnected with
// exponential backoff and jitter.  Each listener's onOpen runs on every
// (re)connection, so whatever it subscribed to is subscribed again.
//
//   const stop = liveSocket("/ws/groups/").listen({
//     onOpen: (socket) => socket.send({ type: "run.watch", ... }),
//     onMessage: (message) => ...,   // parsed JSON
//     onStatus: (status) => ...,     // "connecting" | "on" | "off"
//   });
//   stop();  // the last listener to stop closes the socket

const RETRY_BASE_MS = 1000;
const RETRY_MAX_MS = 15000;

const sockets = new Map();

export function socketUrl(path) {
  const url = new URL(path, location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.href;
}

// Half the capped exponential delay, plus up to as much again at random, so
// that the pages a server restart disconnected do not all return at once.
export function retryDelay(attempt) {
  const ceiling = Math.min(RETRY_BASE_MS * 2 ** attempt, RETRY_MAX_MS);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

class LiveSocket {
  constructor(url) {
    this.url = url;
    this.listeners = new Set();
    this.attempt = 0;
    this.status = "connecting";
    this.socket = null;
    this.timer = null;
  }

  listen(listener) {
    this.listeners.add(listener);
    listener.onStatus?.(this.status);
    if (this.status === "on") listener.onOpen?.(this);
    if (!this.socket && !this.timer) this.connect();
    return () => this.unlisten(listener);
  }

  unlisten(listener) {
    this.listeners.delete(listener);
    if (this.listeners.size) return;
    sockets.delete(this.url);
    clearTimeout(this.timer);
    this.timer = null;
    const socket = this.socket;
    this.socket = null;
    socket?.close(1000, "no listeners");
  }

  // Sends a message now if connected; onOpen is where subscriptions go.
  send(message) {
    if (this.socket?.readyState !== WebSocket.OPEN) return false;
    this.socket.send(JSON.stringify(message));
    return true;
  }

  connect() {
    this.timer = null;
    const socket = new WebSocket(this.url);
    this.socket = socket;
    socket.addEventListener("open", () => {
      this.attempt = 0;
      this.setStatus("on");
      for (const listener of [...this.listeners]) listener.onOpen?.(this);
    });
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(event.data);
      for (const listener of [...this.listeners]) listener.onMessage?.(message);
    });
    socket.addEventListener("close", () => {
      if (this.socket !== socket) return; // closed on purpose by unlisten
      this.socket = null;
      this.setStatus("off");
      this.timer = setTimeout(() => this.connect(), retryDelay(this.attempt));
      this.attempt += 1;
    });
  }

  setStatus(status) {
    this.status = status;
    for (const listener of [...this.listeners]) listener.onStatus?.(status);
  }
}

export function liveSocket(path) {
  const url = socketUrl(path);
  let socket = sockets.get(url);
  if (!socket) {
    socket = new LiveSocket(url);
    sockets.set(url, socket);
  }
  return socket;
}

const STATUS_TEXT = { connecting: "Connecting…", on: "Live", off: "Offline — reconnecting…" };

// An onStatus that shows the socket's state in a dot and, if given, a label.
export function statusShower(dot, label) {
  return (status) => {
    dot.className = status === "on" ? "dot dot-on" : "dot dot-off";
    if (label) label.textContent = STATUS_TEXT[status];
  };
}
