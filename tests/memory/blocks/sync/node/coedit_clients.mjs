// Real loro-websocket clients against our /ws/sync/ (used by test_sync_interop.py).
//
//   node coedit_clients.mjs edit --room ID --token T --container content \
//        --edits 20 URL [URL...]
//     one client per URL (URLs may repeat or point at different servers);
//     all edit the block's text concurrently, wait for every ack, then wait
//     until every client's text holds every edit; prints {"texts": [...]}.
//   node coedit_clients.mjs read --room ID --token T --container content URL
//     a fresh client with an empty document joins and prints {"texts": [text]}.
//   node coedit_clients.mjs offline --room ID --token T --edits 5 URL
//     one client: edits (acked), prints {"phase": "online"}; after the line
//     "down" on stdin waits for the socket to drop, edits offline, prints
//     {"phase": "offline"}; after "up" waits for the reconnect, the rejoin
//     and the acks of the offline edits, then prints {"texts": [text]}.
//   node coedit_clients.mjs offline ... --fresh-on-fold yes URL
//     as offline, but a rejoin the server refuses with app code
//     "history_folded" (its history before this client's version was folded)
//     makes the client start again: a new client and an empty document join,
//     and the offline markers are appended to it again; then prints
//     {"texts": [text], "restarted": true, "joinErrors": [...]}.
//   node coedit_clients.mjs join --room ID [--token T] [--cookie C]
//        [--origin none] [--timeout MS] URL
//     one client tries to connect and join within MS (default 5000): prints
//     {"joined": true, "texts": [text]} or {"joined": false, "error": why}.
//   node coedit_clients.mjs revoked --room ID --token T [--timeout MS] URL
//     one client joins, prints {"phase": "joined"}, and after the line "go"
//     on stdin waits up to MS (default 10000) for the server to close the
//     socket; prints {"roomErrors": [codes], "closeCode": code or null,
//     "ms": ms from "go" to the close (0: closed before)}.
//   Every mode: --origin none sends no Origin header (an agent's client);
//   --cookie sends that Cookie header (a browser session).
import { createInterface } from "node:readline";
import { MessageType, tryDecode } from "loro-protocol";
import { joinedClient, parseArgs, sleep, waitFor } from "../../../../../bench/node/clients.mjs";

const args = parseArgs(process.argv.slice(2));
const [mode, ...urls] = args._;
const container = args.container ?? "content";
const edits = Number(args.edits ?? 10);

const socket = { origin: args.origin !== "none", cookie: args.cookie };

if (mode === "join") {
  const timeoutMs = Number(args.timeout ?? 5000);
  try {
    const c = await Promise.race([
      joinedClient({ url: urls[0], roomId: args.room, token: args.token, ...socket }),
      sleep(timeoutMs).then(() => {
        throw new Error(`not joined within ${timeoutMs} ms`);
      }),
    ]);
    console.log(JSON.stringify({ joined: true, texts: [c.doc.getText(container).toString()] }));
  } catch (error) {
    console.log(JSON.stringify({ joined: false, error: String(error.message ?? error) }));
  }
  process.exit(0);
}

if (mode === "revoked") {
  const timeoutMs = Number(args.timeout ?? 10000);
  const c = await joinedClient({ url: urls[0], roomId: args.room, token: args.token, ...socket });
  const ws = c.client.ws;
  const roomErrors = [];
  let closedAt = null;
  let closeCode = null;
  ws.addEventListener("message", (event) => {
    const msg = tryDecode(new Uint8Array(event.data));
    if (msg?.type === MessageType.RoomError) roomErrors.push(msg.code);
  });
  ws.addEventListener("close", (event) => {
    closedAt = Date.now();
    closeCode = event.code;
  });
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  console.log(JSON.stringify({ phase: "joined" }));
  await lines.next(); // "go"
  const go = Date.now();
  try {
    await waitFor(() => closedAt !== null, timeoutMs, "the server to close");
  } catch {}
  const ms = closedAt === null ? null : Math.max(0, closedAt - go);
  console.log(JSON.stringify({ roomErrors, closeCode, ms }));
  process.exit(0);
}

const clients = [];
for (const [i, url] of urls.entries()) {
  clients.push(
    await joinedClient({
      url,
      roomId: args.room,
      token: args.token,
      peerId: 1000 + i,
      ...socket,
    }),
  );
}
const textOf = (c) => c.doc.getText(container).toString();

if (mode === "edit") {
  await Promise.all(
    clients.map(async (c, i) => {
      for (let k = 0; k < edits; k++) {
        const text = c.doc.getText(container);
        // A random place between markers (never inside one).
        const current = text.toString();
        const places = [0];
        for (let p = 1; p <= current.length; p++) {
          if (current[p - 1] === ">" || current[p - 1] === ";") places.push(p);
        }
        const at = places[Math.floor(Math.random() * places.length)];
        text.insert(at, `<c${i}e${k}>`);
        c.doc.commit();
        await sleep(Math.random() * 10);
      }
    }),
  );
  await Promise.all(clients.map((c) => c.acked()));
  const markers = clients.flatMap((_, i) =>
    Array.from({ length: edits }, (_, k) => `<c${i}e${k}>`),
  );
  try {
    await waitFor(
      () => clients.every((c) => markers.every((m) => textOf(c).includes(m))),
      20000,
      "convergence",
    );
  } catch (error) {
    console.error(JSON.stringify({ texts: clients.map(textOf), errors: clients.map((c) => c.errors) }));
    throw error;
  }
}
if (mode === "offline") {
  const [c] = clients;
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const append = (marker) => {
    const text = c.doc.getText(container);
    text.insert(text.length, marker);
    c.doc.commit();
  };
  for (let k = 0; k < edits; k++) append(`<on${k}>`);
  await c.acked();
  console.log(JSON.stringify({ phase: "online" }));
  await lines.next(); // "down"
  await waitFor(() => c.client.getStatus() !== "connected", 20000, "disconnect");
  for (let k = 0; k < edits; k++) append(`<off${k}>`);
  console.log(JSON.stringify({ phase: "offline", pending: c.pending() }));
  await lines.next(); // "up"
  const acksBefore = c.acks;
  if (args["fresh-on-fold"]) {
    await waitFor(
      () => c.acks > acksBefore || c.roomStatus === "error",
      60000,
      "the rejoin to upload or fail",
    );
    if (c.roomStatus === "error" && c.joinErrors.includes("history_folded")) {
      const joinErrors = c.joinErrors;
      await c.close();
      const fresh = await joinedClient({ url: urls[0], roomId: args.room, token: args.token, ...socket });
      const text = fresh.doc.getText(container);
      for (let k = 0; k < edits; k++) {
        if (!text.toString().includes(`<off${k}>`)) text.insert(text.length, `<off${k}>`);
      }
      fresh.doc.commit();
      await fresh.acked();
      console.log(
        JSON.stringify({ texts: [textOf(fresh)], restarted: true, joinErrors, errors: [fresh.errors] }),
      );
      await fresh.close();
      process.exit(0);
    }
  } else {
    await waitFor(() => c.acks > acksBefore, 60000, "the rejoin to upload");
  }
  await c.acked();
}
console.log(
  JSON.stringify({
    texts: clients.map(textOf),
    errors: clients.map((c) => c.errors),
  }),
);
await Promise.all(clients.map((c) => c.close()));
process.exit(0);
