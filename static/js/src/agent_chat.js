// The partner's chat on an agent's page: a message starts the agent's turn
// (POST, answered with the run's id), then the run is followed live over
// /ws/groups/: text joins its bubble as it streams in, each tool call is a
// <details> row filled in with its result, the answer closes the turn, and
// the page's memory panels ([data-agent-panel]) are fetched again after
// each tool call, so the agent's memory edits show as they happen.
import { liveSocket, statusShower } from "./lib/live.js";
import { requestJson, requestText, showError } from "./lib/request.js";

const chat = document.querySelector("[data-chat]");

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function bubble(log, side, who) {
  log.querySelector("[data-chat-empty]")?.remove();
  const item = element("li", `chat-msg chat-${side}`);
  item.append(element("span", "chat-who", who));
  log.append(item);
  return item;
}

function scrollDown(log) {
  log.scrollTop = log.scrollHeight;
}

function toolRow(name, args) {
  const row = element("details", "chat-tool");
  row.dataset.testid = "chat-tool";
  const summary = element("summary", "", "Tool ");
  summary.append(element("code", "", name));
  const status = element("span", "", " · running…");
  summary.append(status);
  const result = element("pre", "", "…");
  row.append(
    summary,
    element("p", "muted", "Arguments"),
    element("pre", "", JSON.stringify(args, null, 2)),
    element("p", "muted", "Result"),
    result,
  );
  return { row, status, result };
}

async function refreshPanels() {
  try {
    const html = await requestText(location.pathname + location.search);
    const fresh = new DOMParser().parseFromString(html, "text/html");
    for (const panel of document.querySelectorAll("[data-agent-panel]")) {
      const copy = fresh.querySelector(`[data-agent-panel="${panel.dataset.agentPanel}"]`);
      if (copy && copy.innerHTML !== panel.innerHTML) panel.innerHTML = copy.innerHTML;
    }
  } catch (error) {
    console.warn("memory panels not refreshed", error);
  }
}

// One turn's events drawn into the agent's bubble.
class Turn {
  constructor(log, agentName) {
    this.log = log;
    this.item = bubble(log, "agent", agentName);
    this.item.dataset.testid = "chat-turn";
    this.text = null;
    this.calls = new Map();
  }

  addText(piece) {
    if (!this.text) {
      this.text = element("div", "chat-text", "");
      this.item.append(this.text);
    }
    this.text.textContent += piece;
  }

  answer(text) {
    // A final answer was streamed already; a send_message answer was not.
    if (this.text && this.text.textContent.trim() === text.trim()) return;
    this.text = null;
    this.addText(text);
    this.text.dataset.testid = "chat-answer";
  }

  toolStarted({ call_id, fn_name, args }) {
    if (fn_name === "send_message") return; // its message is the answer
    const row = toolRow(fn_name, args);
    this.calls.set(call_id, row);
    this.item.append(row.row);
    this.text = null; // text after the call starts a new paragraph
  }

  toolCompleted({ call_id, result }) {
    const row = this.calls.get(call_id);
    if (!row) return;
    row.status.textContent = result?.ok ? " · done" : " · failed";
    if (!result?.ok) row.row.classList.add("chat-tool-failed");
    row.result.textContent = result?.text ?? "";
    refreshPanels();
  }

  failed(message) {
    this.text = null;
    this.item.append(element("div", "form-error", message));
  }

  // Draws one run event; true once the run is over.
  draw(event, data) {
    if (event === "TextChunk") {
      if (data.is_final) this.answer(data.text);
      else this.addText(data.text);
    } else if (event === "ToolCallStarted") this.toolStarted(data);
    else if (event === "ToolCallCompleted") this.toolCompleted(data);
    else if (event === "Error") this.failed(data.message);
    scrollDown(this.log);
    return event === "Complete" || (event === "Error" && data.recoverable === false);
  }
}

function follow(runId, turn, done) {
  const dot = chat.querySelector("[data-live-dot]");
  const showStatus = statusShower(dot);
  let after = 0;
  const stop = liveSocket("/ws/groups/").listen({
    onStatus: showStatus,
    onOpen: (socket) => socket.send({ type: "run.watch", run_id: runId, after }),
    onMessage: (message) => {
      if (message.type !== "run.event" || message.run_id !== runId) return;
      if (message.seq <= after) return;
      after = message.seq;
      if (turn.draw(message.event, message.data)) {
        stop();
        showStatus("off");
        refreshPanels();
        done();
      }
    },
  });
}

function start() {
  const log = chat.querySelector("[data-chat-log]");
  const form = chat.querySelector("[data-chat-form]");
  const error = chat.querySelector("[data-chat-error]");
  const field = form.querySelector("textarea");
  const button = form.querySelector("button");
  const busy = (on) => {
    button.disabled = on;
    field.disabled = on;
  };
  scrollDown(log);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const message = field.value.trim();
    if (!message) return;
    showError(error, null);
    busy(true);
    try {
      const { run_id: runId } = await requestJson(chat.dataset.sendUrl, {
        method: "POST",
        json: { message },
      });
      const mine = bubble(log, "partner", chat.dataset.partnerName || "You");
      mine.append(element("div", "chat-text", message));
      field.value = "";
      follow(runId, new Turn(log, chat.dataset.agentName), () => {
        busy(false);
        field.focus();
      });
    } catch (failure) {
      showError(error, failure);
      busy(false);
    }
  });
  // Enter sends; Shift+Enter starts a new line.
  field.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
}

if (chat?.querySelector("[data-chat-form]")) start();
