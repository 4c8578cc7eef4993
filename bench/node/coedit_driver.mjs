// Drives one co-editing server with real loro-websocket clients and prints
// JSON figures (bench/coedit.py runs it against our server and SimpleServer).
//
//   node bench/node/coedit_driver.mjs --url ws://... --room ID [--token T]
//        --clients 4 --edits 200 --seconds 5
//
// Latency: the clients take turns; each turn one client commits a small
// insert and we time until every other client's document shows it (one
// sample per receiving client).  Throughput: every client edits in a loop,
// waiting for its own ack each time, for --seconds; edits/s = acked edits / s.
import { performance } from "node:perf_hooks";
import { joinedClient, parseArgs, waitFor } from "./clients.mjs";

const args = parseArgs(process.argv.slice(2));
const n = Number(args.clients ?? 4);
const edits = Number(args.edits ?? 200);
const seconds = Number(args.seconds ?? 5);
const container = args.container ?? "content";

const clients = [];
for (let i = 0; i < n; i++) {
  clients.push(
    await joinedClient({ url: args.url, roomId: args.room, token: args.token, peerId: 500 + i }),
  );
}

// Receivers detect a turn's marker through the document's change events.
const seen = clients.map(() => new Map());
let expecting = null;
clients.forEach((c, i) => {
  c.doc.subscribe(() => {
    if (expecting && !seen[i].has(expecting) && c.doc.getText(container).toString().includes(expecting)) {
      seen[i].set(expecting, performance.now());
    }
  });
});

const samples = [];
for (let turn = 0; turn < edits; turn++) {
  const writer = clients[turn % n];
  const marker = `|${turn}|`;
  expecting = marker;
  const text = writer.doc.getText(container);
  const start = performance.now();
  text.insert(text.length, marker);
  writer.doc.commit();
  await waitFor(
    () => clients.every((c, i) => c === writer || seen[i].has(marker)),
    10000,
    `turn ${turn}`,
  );
  clients.forEach((c, i) => {
    if (c !== writer) samples.push(seen[i].get(marker) - start);
  });
  await writer.acked();
}
expecting = null;

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
samples.sort((a, b) => a - b);

// Sustained edits: every client writes, waits for its ack, writes again.
let stopAt = performance.now() + seconds * 1000;
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
const elapsed = seconds + (performance.now() - stopAt) / 1000;

const errors = clients.flatMap((c) => c.errors);
console.log(
  JSON.stringify({
    clients: n,
    samples: samples.length,
    p50: percentile(samples, 50),
    p95: percentile(samples, 95),
    p99: percentile(samples, 99),
    edits_per_s: acked / elapsed,
    errors,
  }),
);
await Promise.all(clients.map((c) => c.close()));
process.exit(0);
