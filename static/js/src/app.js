// Behaviour of every dashboard page (loaded by templates/base.html):
// - a form with data-confirm="question" asks in a dialog before it submits;
// - "/" outside a field focuses the search box of the top bar;
// - diffs are shown inline or side by side ([data-diff-layout] buttons), a
//   choice kept for every page in localStorage and set on <html>;
// - a form with data-live-search searches as you type (debounced): its
//   results ([data-search-results]) are replaced in place;
// - a button with data-copy="selector" copies that element's text.

import { request } from "./lib/request.js";

const LAYOUT_KEY = "pattern.diffLayout";

document.documentElement.dataset.diffLayout = localStorage.getItem(LAYOUT_KEY) || "inline";
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-diff-layout]");
  if (!button) return;
  localStorage.setItem(LAYOUT_KEY, button.dataset.diffLayout);
  document.documentElement.dataset.diffLayout = button.dataset.diffLayout;
});

document.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-copy]");
  const source = button && document.querySelector(button.dataset.copy);
  if (!source) return;
  const label = button.textContent;
  try {
    await navigator.clipboard.writeText(source.textContent.trim());
    button.textContent = "Copied";
  } catch {
    // No clipboard (an insecure origin): select it for a manual copy.
    getSelection().selectAllChildren(source);
    button.textContent = "Selected — copy it";
  }
  setTimeout(() => (button.textContent = label), 2000);
});

function confirmDialog(form) {
  const dialog = document.createElement("dialog");
  dialog.className = "confirm-dialog";
  dialog.dataset.testid = "confirm-dialog";
  const text = document.createElement("p");
  text.textContent = form.dataset.confirm;
  const actions = document.createElement("div");
  actions.className = "confirm-actions";
  const cancel = document.createElement("button");
  cancel.type = "button";
  cancel.className = "button button-quiet";
  cancel.textContent = "Cancel";
  const ok = document.createElement("button");
  ok.type = "button";
  ok.className = "button button-danger";
  ok.textContent = form.dataset.confirmButton || "Confirm";
  actions.append(cancel, ok);
  dialog.append(text, actions);
  document.body.append(dialog);
  cancel.addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => dialog.remove());
  ok.addEventListener("click", () => {
    form.dataset.confirmed = "true";
    dialog.close();
    form.requestSubmit();
  });
  dialog.showModal();
  cancel.focus();
}

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!form.dataset.confirm || form.dataset.confirmed === "true") return;
  event.preventDefault();
  confirmDialog(form);
});

document.addEventListener("keydown", (event) => {
  if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.target.closest?.("input, textarea, select, [contenteditable], .cm-editor")) return;
  const search = document.querySelector("[data-search-shortcut]");
  if (!search) return;
  event.preventDefault();
  search.focus();
  search.select?.();
});

const SEARCH_DELAY_MS = 300;

for (const form of document.querySelectorAll("[data-live-search]")) {
  let timer;
  let latest = 0;
  const run = async () => {
    const query = new URLSearchParams(new FormData(form));
    if (!query.get("q")?.trim()) return;
    const url = `${form.action}?${query}`;
    const ticket = (latest += 1);
    let html;
    try {
      html = await (await request(url)).text();
    } catch {
      return; // the form still submits the usual way
    }
    if (ticket !== latest) return; // a newer search is on its way
    const fresh = new DOMParser().parseFromString(html, "text/html");
    const target = document.querySelector("[data-search-results]");
    const copy = fresh.querySelector("[data-search-results]");
    if (target && copy) target.innerHTML = copy.innerHTML;
    history.replaceState(null, "", url);
  };
  const later = () => {
    clearTimeout(timer);
    timer = setTimeout(run, SEARCH_DELAY_MS);
  };
  form.addEventListener("input", later);
  form.addEventListener("change", later);
}
