// Live co-editing of a memory block: CodeMirror 6 bound to the block's Loro
// text (loro-codemirror), synced over /ws/sync/ with the loro-websocket client
// (the Loro Syncing Protocol), remote cursors through a %EPH presence room.
// Structured blocks (data-mode="rendered") join the same room without an
// editor and refresh their rendered view (from the API) on every change.
// Mounted on every [data-block-editor] element (templates/memory/_editor.html).
import init, { EphemeralStore, LoroDoc, UndoManager } from "loro-crdt";
import { EditorView, basicSetup } from "codemirror";
import { EditorState } from "@codemirror/state";
import { LoroExtensions, getCursorEphemeralKey, getUserEphemeralKey } from "loro-codemirror";
import { LoroWebsocketClient } from "loro-websocket";
import { MessageType } from "loro-protocol";
import { LoroAdaptor, LoroEphemeralAdaptor } from "loro-adaptors/loro";
import { socketUrl } from "./lib/live.js";
import { requestJson } from "./lib/request.js";

const PRESENCE_TIMEOUT_MS = 30000;
// The server's JoinError app code for a copy older than the block's kept
// history (docs/coediting.md): start again from a fresh snapshot.  A
// RoomError has no app code: an eviction for an edit built on folded
// history has a message starting with it and a colon.
const HISTORY_FOLDED = "history_folded";
const stashKey = (blockId) => `pattern-folded-edits-${blockId}`;
const REFRESH_DELAY_MS = 150;
const COLOURS = 8;

function colourClass(name) {
  let hash = 0;
  for (const ch of name) hash = (hash * 31 + ch.codePointAt(0)) >>> 0;
  return `peer-colour-${hash % COLOURS}`;
}

class BlockEditor {
  constructor(root) {
    this.root = root;
    this.blockId = root.dataset.blockId;
    this.readOnly = root.dataset.readonly === "true";
    this.userName = root.dataset.userName || "someone";
    this.textContainer = root.dataset.textContainer || "content";
    this.badge = root.querySelector("[data-editor-status]");
    this.peersBox = root.querySelector("[data-editor-peers]");
    this.pending = 0;
    this.roomStatus = "connecting";
    this.clientStatus = "connecting";
  }

  async start() {
    await init({ module_or_path: this.root.dataset.wasmUrl });
    this.doc = new LoroDoc();
    // The rest of the page (block_page.js) follows the block through this.
    this.doc.subscribe((event) => {
      this.root.dispatchEvent(
        new CustomEvent("block-change", { bubbles: true, detail: { by: event.by } }),
      );
    });
    if (this.root.dataset.mode === "rendered") return this.startRendered();
    this.presence = new EphemeralStore(PRESENCE_TIMEOUT_MS);
    const user = { name: this.userName, colorClassName: colourClass(this.userName) };
    const getText = (doc) => doc.getText(this.textContainer);
    const extensions = [
      basicSetup,
      EditorView.lineWrapping,
      LoroExtensions(
        this.doc,
        { user, ephemeral: this.presence },
        this.readOnly ? undefined : new UndoManager(this.doc, {}),
        getText,
      ),
    ];
    if (this.readOnly) {
      extensions.push(EditorState.readOnly.of(true), EditorView.editable.of(false));
    }
    this.root.querySelector("[data-editor-fallback]")?.setAttribute("hidden", "");
    this.view = new EditorView({
      parent: this.root.querySelector("[data-editor-mount]"),
      state: EditorState.create({ doc: getText(this.doc).toString(), extensions }),
    });
    this.root.editor = this; // for tests and the console

    // Edits made while the socket is down stay in the document and are sent
    // when the room is joined again (the server answers with its version).
    this.doc.subscribeLocalUpdates(() => {
      if (this.state() !== "connected") this.pending += 1;
      this.render();
    });
    this.presence.subscribe(() => this.renderPeers());
    addEventListener("offline", () => this.render());
    addEventListener("online", () => {
      this.render();
      // A socket the browser kept through the outage is stale (the client
      // already gave it up): close it so that the client reconnects, rejoins
      // and uploads what was edited offline.
      setTimeout(() => {
        const socket = this.client.socket;
        if (this.client.getStatus() !== "connected" && socket?.readyState === WebSocket.OPEN) {
          socket.close(1000, "stale");
        }
      }, 1000);
    });

    await this.joinDocument();
    this.presenceRoom = await this.client.join({
      roomId: this.blockId,
      crdtAdaptor: new LoroEphemeralAdaptor(this.presence),
    });
    // Leaving: take our cursor off the others' screens now, not at its timeout.
    addEventListener("pagehide", () => {
      this.presence.delete(getCursorEphemeralKey(this.doc));
      this.presence.delete(getUserEphemeralKey(this.doc));
    });
    this.showStashedEdits();
    this.root.dataset.ready = "true";
    this.render();
  }

  async joinDocument() {
    this.client = new LoroWebsocketClient({ url: socketUrl(this.root.dataset.syncUrl) });
    this.client.onStatusChange((status) => {
      this.clientStatus = status;
      this.render();
    });
    // The client reports a refused rejoin only as the room's "error" status;
    // the reason is in the JoinError it handles.
    const handleJoinError = this.client.handleJoinError.bind(this.client);
    this.client.handleJoinError = (msg, pending, id) => {
      if (msg.appCode === HISTORY_FOLDED && msg.roomId === this.blockId) this.historyFolded = true;
      return handleJoinError(msg, pending, id);
    };
    // An eviction because the edit just refused built on folded history:
    // the client drops the room's status listener before it reports the
    // eviction, so it is acted on here.
    const handleMessage = this.client.handleMessage.bind(this.client);
    this.client.handleMessage = async (msg) => {
      await handleMessage(msg);
      if (
        msg.type === MessageType.RoomError &&
        msg.roomId === this.blockId &&
        msg.message.startsWith(`${HISTORY_FOLDED}:`)
      ) {
        this.historyFolded = true;
        this.restartFresh();
      }
    };
    const onRoomStatus = (status) => {
      this.roomStatus = status;
      if (status === "joined") this.pending = 0;
      if (status === "error" && this.historyFolded) this.restartFresh();
      this.render();
    };
    const adaptor = new LoroAdaptor(this.doc, {
      onUpdateError: (_updates, _code, reason) => this.showError(reason),
    });
    this.room = await this.client.join({
      roomId: this.blockId,
      crdtAdaptor: adaptor,
      onStatusChange: onRoomStatus,
    });
  }

  // This copy is older than the block's kept history (the server folded the
  // history it builds on: it was offline, or the server stopped keeping its
  // version): reload the page, which starts from a fresh snapshot.  Edits
  // not stored - made offline, or refused - cannot merge into it; their text
  // is kept for the reloaded page to show (showStashedEdits).
  restartFresh() {
    if (this.restarting) return;
    this.restarting = true;
    if ((this.pending || this.error) && this.root.dataset.mode !== "rendered") {
      // As the page goes: what is typed until then is kept too.
      const stash = () =>
        sessionStorage.setItem(stashKey(this.blockId), this.doc.getText(this.textContainer).toString());
      stash();
      addEventListener("pagehide", stash);
    }
    location.reload();
  }

  showStashedEdits() {
    const text = sessionStorage.getItem(stashKey(this.blockId));
    if (text === null) return;
    sessionStorage.removeItem(stashKey(this.blockId));
    const box = document.createElement("details");
    box.className = "callout";
    box.open = true;
    box.dataset.testid = "folded-edits";
    const summary = document.createElement("summary");
    summary.textContent =
      "Your latest edits could not be merged: the block's history they built on was folded (history retention) while your copy was out of date. The block was reloaded from a fresh snapshot; your text then is below to copy back.";
    const pre = document.createElement("pre");
    pre.className = "block-rendered";
    pre.textContent = text;
    box.append(summary, pre);
    this.root.prepend(box);
  }

  // A structured block: show the server's rendering, refreshed on every change.
  async startRendered() {
    this.readOnly = true;
    this.rendered = this.root.querySelector("[data-testid=rendered]");
    let timer;
    this.doc.subscribe(() => {
      clearTimeout(timer);
      timer = setTimeout(() => this.refreshRendered(), REFRESH_DELAY_MS);
    });
    this.root.editor = this;
    await this.joinDocument();
    this.root.dataset.ready = "true";
    this.render();
  }

  async refreshRendered() {
    try {
      this.rendered.textContent = (await requestJson(this.root.dataset.apiUrl)).rendered;
    } catch (error) {
      console.warn("could not refresh the rendered block", error);
    }
  }

  showError(reason) {
    this.error = reason;
    this.render();
  }

  state() {
    if (navigator.onLine === false) return "offline";
    if (this.roomStatus === "joined" && this.clientStatus === "connected") return "connected";
    return "reconnecting";
  }

  render() {
    if (!this.badge) return;
    const state = this.state();
    let text = {
      connected: this.readOnly ? "Live (read only)" : "Connected",
      offline: "Offline",
      reconnecting: "Reconnecting…",
    }[state];
    if (state === "connected" && this.root.dataset.mode === "rendered") text = "Live";
    if (this.pending && state !== "connected") {
      text += ` — ${this.pending} pending edit${this.pending === 1 ? "" : "s"}`;
    }
    if (this.error) text += ` (last edit refused: ${this.error.replaceAll("_", " ")})`;
    this.badge.textContent = text;
    this.badge.className = {
      connected: "badge badge-ok",
      offline: "badge badge-muted",
      reconnecting: "badge badge-warn",
    }[state];
    this.badge.dataset.status = state;
    this.badge.dataset.pending = String(this.pending);
  }

  renderPeers() {
    if (!this.peersBox) return;
    const me = `${this.doc.peerIdStr}-cm-user`;
    const names = [];
    for (const [key, value] of Object.entries(this.presence.getAllStates())) {
      if (key.endsWith("-cm-user") && key !== me && value?.name) names.push(value.name);
    }
    this.peersBox.textContent = names.length ? `Also here: ${[...new Set(names)].join(", ")}` : "";
  }

  text() {
    return this.doc.getText(this.textContainer).toString();
  }
}

for (const root of document.querySelectorAll("[data-block-editor]")) {
  new BlockEditor(root).start().catch((error) => {
    console.error(error);
    const badge = root.querySelector("[data-editor-status]");
    if (badge) badge.textContent = `Editor failed to start: ${error.message}`;
  });
}
