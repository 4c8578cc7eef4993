// The activity feed, live: events pushed on the constellation's websocket
// are added on top when they match the filters chosen in the form.
import { liveSocket, statusShower } from "./lib/live.js";

const box = document.querySelector("[data-activity-url]");
const feed = document.querySelector("[data-activity-feed]");
const filters = document.querySelector("[data-activity-filters]");
const RANK = { low: 0, medium: 1, high: 2, critical: 3 };
const MAX_ITEMS = 200;

function matches(event) {
  const chosen = new FormData(filters);
  const agent = chosen.get("agent");
  const kind = chosen.get("kind");
  const importance = chosen.get("importance");
  if (agent && String(event.agent_id) !== agent) return false;
  if (kind && event.event_type !== kind) return false;
  if (importance && RANK[event.importance] < RANK[importance]) return false;
  return true;
}

function badge(text, extra = "") {
  const span = document.createElement("span");
  span.className = `badge ${extra}`.trim();
  span.textContent = text;
  return span;
}

function show(event) {
  feed.querySelector("[data-feed-empty]")?.remove();
  const item = document.createElement("li");
  item.className = `feed-item importance-${event.importance} feed-new`;
  const time = document.createElement("time");
  time.dateTime = event.created_at;
  time.textContent = "just now";
  const text = document.createElement("span");
  text.className = "feed-text";
  text.textContent = event.text;
  item.append(time, " ", badge(event.event_type.replaceAll("_", " ")), " ");
  if (event.importance !== "low") item.append(badge(event.importance, "badge-warn"), " ");
  item.append(text);
  feed.prepend(item);
  while (feed.children.length > MAX_ITEMS) feed.lastElementChild.remove();
}

function listen() {
  const showStatus = statusShower(
    box.querySelector("[data-activity-dot]"),
    box.querySelector("[data-activity-label]"),
  );
  liveSocket(box.dataset.activityUrl).listen({
    onStatus: showStatus,
    onMessage: (message) => {
      if (message.type !== "activity.events") return;
      for (const event of message.events) if (matches(event)) show(event);
    },
  });
}

if (box && feed && filters) {
  for (const select of filters.querySelectorAll("select")) {
    select.addEventListener("change", () => filters.requestSubmit());
  }
  listen();
}
