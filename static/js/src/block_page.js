// The block page around the live editor (templates/memory/block.html):
// - history: a version's view and diff open in place under its row, the
//   compare form and "diff to now" fill the compare box (app.js switches
//   the diff layout);
// - live panels: when the block changes ("block-change" events from
//   block_editor.js), every [data-live] element is replaced by its copy in a
//   fresh render of the page (not a form with unsaved input, nor a history
//   with a version open), and an agent's edit is named for a moment;
// - list editors of structured forms: add, remove and reorder items;
// - keyboard: Ctrl/Cmd+S saves the form being edited (app.js has the
//   shortcuts of every page).

import { requestText as fragment } from "./lib/request.js";

const LIVE_REFRESH_MS = 400;
const AGENT_MARK_MS = 6000;

class BlockHistory {
  constructor(section) {
    this.section = section;
    this.versionUrl = section.dataset.versionUrl; // ends in /0/
    this.compareUrl = section.dataset.compareUrl;
    this.compareTarget = section.querySelector("[data-compare-target]");
    section.addEventListener("click", (event) => this.onClick(event));
    section.querySelector("[data-compare-form]")?.addEventListener("submit", (event) => {
      event.preventDefault();
      const form = new FormData(event.target);
      const query = new URLSearchParams({ from: form.get("from") || "" });
      if (form.get("to")) query.set("to", form.get("to"));
      this.compare(`${this.compareUrl}?${query}`);
    });
  }

  onClick(event) {
    const open = event.target.closest("[data-open-version]");
    if (open) {
      event.preventDefault();
      this.toggleVersion(open.closest("tr"), open.dataset.openVersion);
      return;
    }
    const from = event.target.closest("[data-compare-from]");
    if (from) {
      event.preventDefault();
      this.compare(`${this.compareUrl}?from=${from.dataset.compareFrom}`);
      return;
    }
    const link = event.target.closest("a[data-compare-url]");
    if (link) {
      event.preventDefault();
      this.compare(link.dataset.compareUrl);
    }
  }

  async toggleVersion(row, number) {
    const next = row.nextElementSibling;
    if (next?.classList.contains("version-row")) {
      next.remove();
      row.classList.remove("is-open");
      return;
    }
    const detail = document.createElement("tr");
    detail.className = "version-row";
    detail.id = `version-${number}`;
    const cell = detail.insertCell();
    cell.colSpan = row.cells.length;
    cell.textContent = "Loading…";
    row.after(detail);
    row.classList.add("is-open");
    try {
      cell.innerHTML = await fragment(this.versionUrl.replace(/\/0\/$/, `/${number}/`));
    } catch (error) {
      cell.textContent = `Could not load version ${number}: ${error.message}`;
    }
  }

  async compare(url) {
    this.compareTarget.textContent = "Loading…";
    try {
      this.compareTarget.innerHTML = await fragment(url);
    } catch (error) {
      this.compareTarget.textContent = `Could not compare: ${error.message}`;
    }
    this.compareTarget.scrollIntoView({ block: "nearest" });
  }
}

// Live panels: refetch the page and swap each [data-live] element whose
// copy changed.  Panels holding focus (a form being filled in) are kept.
let refreshTimer;
let refreshing = false;

async function refreshPanels() {
  if (refreshing) {
    scheduleRefresh();
    return;
  }
  refreshing = true;
  try {
    const html = await fragment(location.pathname + location.search);
    const fresh = new DOMParser().parseFromString(html, "text/html");
    for (const panel of document.querySelectorAll("[data-live]")) {
      const copy = fresh.querySelector(`[data-live="${panel.dataset.live}"]`);
      if (!copy || copy.innerHTML === panel.innerHTML) continue;
      // A version opened in the history stays open; a form being filled in
      // is not overwritten, only marked as behind the block.
      if (panel.querySelector(".version-row")) continue;
      const focused = panel.contains(document.activeElement) && document.activeElement !== document.body;
      if (focused || "dirty" in panel.dataset) {
        panel.dataset.stale = "true";
        continue;
      }
      panel.innerHTML = copy.innerHTML;
      for (const editor of panel.querySelectorAll("[data-list-editor]")) {
        editor.dataset.initial = listState(editor);
      }
      for (const name of copy.getAttributeNames()) panel.setAttribute(name, copy.getAttribute(name));
      delete panel.dataset.stale;
    }
    markAgentEdit(fresh);
    // How many refreshes the page has taken in (what a test waits for).
    document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
  } catch (error) {
    console.warn("live refresh failed", error);
  } finally {
    refreshing = false;
  }
}

function scheduleRefresh() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refreshPanels, LIVE_REFRESH_MS);
}

// The newest version, when an agent made it and it is new to this page,
// names the agent beside the content for a few seconds.  The page's own
// version counts as seen: a refresh right after opening (the editor's first
// sync) must not announce an edit that is minutes old.
function versionKey(latest) {
  return latest ? `${latest.dataset.latestVersion}@${latest.dataset.latestAt}` : "";
}

let newestSeen = versionKey(document.querySelector("[data-latest-version]"));

function markAgentEdit(fresh) {
  const latest = fresh.querySelector("[data-latest-version]");
  const mark = document.querySelector("[data-agent-mark]");
  if (!latest || !mark) return;
  const key = versionKey(latest);
  if (key === newestSeen) return;
  newestSeen = key;
  if (latest.dataset.latestKind !== "agent") return;
  mark.textContent = `${latest.dataset.latestName} is editing`;
  mark.hidden = false;
  clearTimeout(mark.timer);
  mark.timer = setTimeout(() => {
    mark.hidden = true;
  }, AGENT_MARK_MS);
}

document.addEventListener("block-change", scheduleRefresh);

// A live form with unsaved input is not refreshed under the person typing.
function markDirty(event) {
  const panel = event.target.closest?.("form[data-live]");
  if (panel) panel.dataset.dirty = "";
}
document.addEventListener("input", markDirty);
document.addEventListener("click", (event) => {
  if (event.target.closest("[data-item-add], [data-item-remove], [data-item-up], [data-item-down]")) {
    markDirty(event);
  }
});

// Ctrl/Cmd+S submits the form holding focus; text is saved live, so in the
// editor it only confirms that (and keeps the browser's save dialog away).
document.addEventListener("keydown", (event) => {
  if (!(event.ctrlKey || event.metaKey) || event.key.toLowerCase() !== "s") return;
  event.preventDefault();
  const form = document.activeElement?.closest?.("form");
  if (form) {
    form.requestSubmit();
    return;
  }
  const status = document.querySelector("[data-editor-status]");
  status?.classList.add("badge-flash");
  setTimeout(() => status?.classList.remove("badge-flash"), 800);
});

// List editors of structured forms (templates/memory/_list_items.html):
// new items get keys of their own; moving rows moves their hidden key
// inputs, which is the order the server reads.
let newItems = 0;

function listItem(editor) {
  const name = editor.dataset.name;
  const key = `new${(newItems += 1)}`;
  const item = document.createElement("li");
  item.className = "list-item";
  item.dataset.listItem = "";
  const hidden = Object.assign(document.createElement("input"), { type: "hidden", name, value: key });
  item.append(hidden);
  if (editor.dataset.checkbox === "true") {
    item.append(Object.assign(document.createElement("input"), { type: "checkbox", name: `${name}#${key}.done` }));
  }
  const text = Object.assign(document.createElement("input"), { type: "text", name: `${name}#${key}` });
  text.setAttribute("aria-label", "new item");
  const tools = document.createElement("span");
  tools.className = "item-tools";
  for (const [attr, label, glyph] of [["itemUp", "move up", "↑"], ["itemDown", "move down", "↓"], ["itemRemove", "remove", "✕"]]) {
    const button = Object.assign(document.createElement("button"), { type: "button", className: "icon-button", textContent: glyph, title: label });
    button.dataset[attr] = "";
    button.setAttribute("aria-label", label);
    tools.append(button);
  }
  item.append(text, tools);
  return item;
}

document.addEventListener("click", (event) => {
  const editor = event.target.closest("[data-list-editor]");
  if (!editor) return;
  const item = event.target.closest("[data-list-item]");
  if (event.target.closest("[data-item-add]")) {
    const fresh = listItem(editor);
    editor.querySelector("[data-list-items]").append(fresh);
    fresh.querySelector("input[type=text]").focus();
  } else if (item && event.target.closest("[data-item-remove]")) {
    item.remove();
  } else if (item && event.target.closest("[data-item-up]")) {
    item.previousElementSibling?.before(item);
  } else if (item && event.target.closest("[data-item-down]")) {
    item.nextElementSibling?.after(item);
  }
});

// A structured form posts only what was changed on this page, so that a
// field someone else changed meanwhile keeps their value (the server sets
// only the fields it receives: memory/blocks/forms.py).
function listState(editor) {
  return JSON.stringify(
    [...editor.querySelectorAll("[data-list-item]")].map((item) => [
      item.querySelector("input[type=text]")?.value,
      item.querySelector("input[type=checkbox]")?.checked ?? null,
    ]),
  );
}

for (const editor of document.querySelectorAll("form[data-live] [data-list-editor]")) {
  editor.dataset.initial = listState(editor);
}

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!form.matches("form.structured-form")) return;
  for (const editor of form.querySelectorAll("[data-list-editor]")) {
    if (listState(editor) !== editor.dataset.initial) continue;
    for (const input of editor.querySelectorAll("input")) input.disabled = true;
  }
  for (const input of form.querySelectorAll("[name^='f:'], [name^='t:']")) {
    const unchanged =
      input.type === "checkbox" ? input.checked === input.defaultChecked : input.value === input.defaultValue;
    if (!unchanged) continue;
    input.disabled = true;
    const marker = form.querySelector(`[data-marks="${CSS.escape(input.name)}"]`);
    if (marker) marker.disabled = true;
  }
});

for (const section of document.querySelectorAll("[data-block-history]")) new BlockHistory(section);

// Blame: the Content card's toggle swaps the editor for the text coloured
// by author (memory/_blame.html), fetched fresh each time it is opened.
class BlameToggle {
  constructor(toggle) {
    this.toggle = toggle;
    this.card = toggle.closest("section");
    this.target = this.card.querySelector("[data-blame-target]");
    this.hides = this.card.querySelector("[data-blame-hides]");
    toggle.addEventListener("click", (event) => {
      event.preventDefault();
      this.flip();
    });
  }

  async flip() {
    const opening = this.target.hidden;
    this.toggle.setAttribute("aria-pressed", String(opening));
    this.hides.hidden = opening;
    this.target.hidden = !opening;
    if (!opening) return;
    this.target.textContent = "Loading…";
    try {
      this.target.innerHTML = await fragment(this.toggle.dataset.blameUrl);
    } catch (error) {
      this.target.textContent = `Could not load who wrote what: ${error.message}`;
    }
  }
}

for (const toggle of document.querySelectorAll("[data-blame-toggle]")) new BlameToggle(toggle);
