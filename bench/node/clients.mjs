// Node helpers around the real npm loro-websocket client, shared by the
// interop/durability tests (tests/memory/blocks/sync/node/) and bench/coedit.py.
import WebSocketImpl from "ws";
import { LoroDoc } from "loro-crdt";
import { LoroWebsocketClient } from "loro-websocket";
import { LoroAdaptor } from "loro-adaptors/loro";

// Node 20 has no global WebSocket.  By default a client sends the server's
// own origin, as a page of the site would; `joinedClient({origin: false})`
// sends none, as an agent's client does, and `cookie` sends a Cookie header
// (a session).  The options apply to the sockets opened after the call.
let socketOptions = { origin: true, cookie: undefined };
class OriginWebSocket extends WebSocketImpl {
  constructor(url, protocols) {
    const options = {};
    if (socketOptions.origin) options.origin = new URL(url.replace(/^ws/, "http")).origin;
    if (socketOptions.cookie) options.headers = { cookie: socketOptions.cookie };
    super(url, protocols, options);
  }
}
globalThis.WebSocket = OriginWebSocket;
// Each client adds online/offline listeners to `process`.
process.setMaxListeners(0);

export function parseArgs(argv) {
  const args = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg.startsWith("--")) {
      args[arg.slice(2)] = argv[i + 1];
      i += 1;
    } else {
      args._.push(arg);
    }
  }
  return args;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function waitFor(predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/**
 * A loro-websocket client joined to one %LOR room.  `acked()` resolves when
 * every update this client sent has been acknowledged; `errors` collects the
 * reasons of refused updates, `joinErrors` the app codes of refused joins,
 * and `roomStatus` is the room's latest status.
 */
export async function joinedClient({
  url,
  roomId,
  token,
  doc,
  peerId,
  origin = true,
  cookie,
}) {
  socketOptions = { origin, cookie };
  doc = doc ?? new LoroDoc();
  if (peerId !== undefined) doc.setPeerId(BigInt(peerId));
  const errors = [];
  const client = new LoroWebsocketClient({ url, pingIntervalMs: 15000 });
  const ackWaiters = new Set();
  let acks = 0;
  const consume = client.consumeSentBatch.bind(client);
  client.consumeSentBatch = (refId) => {
    const entry = consume(refId);
    acks += 1;
    // After the room's onUpdateError has run for a refused update.
    for (const waiter of [...ackWaiters]) queueMicrotask(waiter);
    return entry;
  };
  // The app codes of the join errors the server sent (a rejoin's included:
  // the client itself only reports its room's status as "error").
  const joinErrors = [];
  const handleJoinError = client.handleJoinError.bind(client);
  client.handleJoinError = (msg, pending, id) => {
    joinErrors.push(msg.appCode ?? String(msg.code));
    return handleJoinError(msg, pending, id);
  };
  let roomStatus = "connecting";
  await client.waitConnected();
  const adaptor = new LoroAdaptor(doc, {
    onUpdateError: (_updates, code, reason) => errors.push(reason ?? String(code)),
  });
  const auth = token ? new TextEncoder().encode(token) : undefined;
  const room = await client.join({
    roomId,
    crdtAdaptor: adaptor,
    auth,
    onStatusChange: (status) => {
      roomStatus = status;
    },
  });
  await room.waitForReachingServerVersion();
  return {
    client,
    room,
    doc,
    errors,
    joinErrors,
    get roomStatus() {
      return roomStatus;
    },
    get acks() {
      return acks;
    },
    pending() {
      return client.sentUpdateBatches.size;
    },
    acked(timeoutMs = 20000) {
      if (client.sentUpdateBatches.size === 0) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          ackWaiters.delete(check);
          reject(new Error("timed out waiting for acks"));
        }, timeoutMs);
        const check = () => {
          if (client.sentUpdateBatches.size !== 0) return;
          clearTimeout(timer);
          ackWaiters.delete(check);
          resolve();
        };
        ackWaiters.add(check);
      });
    },
    onAck(cb) {
      ackWaiters.add(cb);
      return () => ackWaiters.delete(cb);
    },
    async close() {
      try {
        await room.destroy();
      } catch {}
      client.destroy();
    },
  };
}
