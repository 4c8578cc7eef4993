// Drives co-editing servers with real loro-websocket clients and prints JSON
// figures per server (bench/coedit.py runs it against our server and
// SimpleServer together).
//
//   node bench/node/coedit_driver.mjs --clients 4 --edits 200 --seconds 5
//        --warmup 20 --servers '[{"name": "ours", "url": "ws://...",
//                                  "room": "ID", "token": "T"}, ...]'
//
// Latency: in each server's room the clients take turns; each turn one
// client commits a small insert and we time until every other client's
// document shows it (one sample per receiving client).  The servers' turns
// alternate (A B, B A, ...) from this one process, so load from anything
// else on the machine falls on all of them alike; --warmup turns per server
// come first and are not timed.  Throughput: every client of a room edits in
// a loop, waiting for its own ack each time, for --seconds, one server after
// the other; edits/s = acked edits / s.
import { performance } from "node:perf_hooks";
import { joinedClient, parseArgs, waitFor } from "./clients.mjs";

const args = parseArgs(process.argv.slice(2));
const n = Number(args.clients ?? 4);
const edits = Number(args.edits ?? 200);
const warmup = Number(args.warmup ?? 20);
const seconds = Number(args.seconds ?? 5);
const container = args.container ?? "content";
const servers = JSON.parse(args.servers);

async function joinedRoom({ url, room, token }) {
  const clients = [];
  for (let i = 0; i < n; i++) {
    clients.push(await joinedClient({ url, roomId: room, token, peerId: 500 + i }));
  }
  // Receivers detect a turn's marker through the document's change events.
  const state = { clients, seen: clients.map(() => new Map()), expecting: null, samples: [] };
  clients.forEach((c, i) => {
    c.doc.subscribe(() => {
      const marker = state.expecting;
      if (marker && !state.seen[i].has(marker) && c.doc.getText(container).toString().includes(marker)) {
        state.seen[i].set(marker, performance.now());
      }
    });
  });
  return state;
}

async function turn(state, index, marker, timed) {
  const { clients, seen } = state;
  const writer = clients[index % n];
  state.expecting = marker;
  const text = writer.doc.getText(container);
  const start = performance.now();
  text.insert(text.length, marker);
  writer.doc.commit();
  await waitFor(
    () => clients.every((c, i) => c === writer || seen[i].has(marker)),
    10000,
    `turn ${marker}`,
  );
  if (timed) {
    clients.forEach((c, i) => {
      if (c !== writer) state.samples.push(seen[i].get(marker) - start);
    });
  }
  await writer.acked();
  state.expecting = null;
}

async function sustained({ clients }) {
  const stopAt = performance.now() + seconds * 1000;
  let acked = 0;
  await Promise.all(
    clients.map(async (c, i) => {
      let k = 0;
      while (performance.now() < stopAt) {
        const text = c.doc.getText(container);
        text.insert(0, `s${i}.${k++};`);
        c.doc.commit();
        await c.acked(20000);
        acked += 1;
      }
    }),
  );
  return acked / (seconds + (performance.now() - stopAt) / 1000);
}

const rooms = [];
for (const server of servers) rooms.push(await joinedRoom(server));

for (let t = 0; t < warmup + edits; t++) {
  const timed = t >= warmup;
  const marker = timed ? `|${t - warmup}|` : `|w${t}|`;
  const order = t % 2 === 0 ? rooms : [...rooms].reverse();
  for (const state of order) await turn(state, t, marker, timed);
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const figures = {};
for (const [k, server] of servers.entries()) {
  const state = rooms[k];
  const samples = [...state.samples].sort((a, b) => a - b);
  figures[server.name] = {
    clients: n,
    samples: samples.length,
    p50: percentile(samples, 50),
    p95: percentile(samples, 95),
    p99: percentile(samples, 99),
    edits_per_s: await sustained(state),
    errors: state.clients.flatMap((c) => c.errors),
  };
}
console.log(JSON.stringify(figures));
await Promise.all(rooms.flatMap((state) => state.clients.map((c) => c.close())));
process.exit(0);
