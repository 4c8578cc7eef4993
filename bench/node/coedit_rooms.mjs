// Many open rooms with two loro-websocket clients each, against each server
// (bench/coedit.py --rooms): joins every room of every server, prints
// "joined" and waits for a line on stdin (the caller reads the servers'
// resident memory meanwhile), then times fan-out: each turn one room's first
// client commits a small insert and we time until the room's second client
// shows it; rooms are visited in turn, the servers' turns alternating.
// Prints JSON figures per server last.
//
//   node bench/node/coedit_rooms.mjs --edits 500 --warmup 50
//        --servers '[{"name": "ours", "url": "ws://...", "rooms": ["ID", ...],
//                     "token": "T"}, ...]'
import { createInterface } from "node:readline";
import { performance } from "node:perf_hooks";
import { joinedClient, parseArgs, waitFor } from "./clients.mjs";

const args = parseArgs(process.argv.slice(2));
const edits = Number(args.edits ?? 500);
const warmup = Number(args.warmup ?? 50);
const container = "content";
const servers = JSON.parse(args.servers);
// Joins in flight at once per server.
const JOINS_AT_ONCE = 20;

async function joinedPair({ url, token }, roomId, k) {
  const writer = await joinedClient({ url, roomId, token, peerId: 10_000 + 2 * k });
  const reader = await joinedClient({ url, roomId, token, peerId: 10_001 + 2 * k });
  const pair = { writer, reader, expecting: null, seenAt: null };
  reader.doc.subscribe(() => {
    if (pair.expecting && pair.seenAt === null && reader.doc.getText(container).toString().includes(pair.expecting)) {
      pair.seenAt = performance.now();
    }
  });
  return pair;
}

async function joinedRooms(server) {
  const pairs = new Array(server.rooms.length);
  let next = 0;
  await Promise.all(
    [...Array(JOINS_AT_ONCE).keys()].map(async () => {
      while (next < server.rooms.length) {
        const k = next++;
        pairs[k] = await joinedPair(server, server.rooms[k], k);
      }
    }),
  );
  return pairs;
}

async function turn(pair, marker) {
  pair.expecting = marker;
  pair.seenAt = null;
  const text = pair.writer.doc.getText(container);
  const start = performance.now();
  text.insert(text.length, marker);
  pair.writer.doc.commit();
  await waitFor(() => pair.seenAt !== null, 10000, `turn ${marker}`);
  const took = pair.seenAt - start;
  await pair.writer.acked();
  pair.expecting = null;
  return took;
}

const rooms = [];
for (const server of servers) rooms.push(await joinedRooms(server));
console.log("joined");
const lines = createInterface({ input: process.stdin });
await new Promise((resolve) => lines.once("line", resolve));

const samples = servers.map(() => []);
for (let t = 0; t < warmup + edits; t++) {
  const order = t % 2 === 0 ? [...servers.keys()] : [...servers.keys()].reverse();
  for (const k of order) {
    const pairs = rooms[k];
    const took = await turn(pairs[t % pairs.length], `|r${t}|`);
    if (t >= warmup) samples[k].push(took);
  }
}
const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const figures = {};
for (const [k, server] of servers.entries()) {
  const sorted = [...samples[k]].sort((a, b) => a - b);
  figures[server.name] = {
    rooms: rooms[k].length,
    samples: sorted.length,
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    errors: rooms[k].flatMap((pair) => [...pair.writer.errors, ...pair.reader.errors]),
  };
}
console.log(JSON.stringify(figures));
lines.close();
await Promise.all(rooms.flat().flatMap((pair) => [pair.writer.close(), pair.reader.close()]));
process.exit(0);
