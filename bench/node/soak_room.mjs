// One co-editing room under steady load for bench/soak.py: --clients
// loro-websocket clients join the room, each inserts a short text every
// --interval-ms and waits for the server's ack, for --seconds.  Prints one
// JSON line: acked edits, p50/p95 of commit-to-ack in ms, refused updates,
// and failures (timeouts, dropped connections).
//
//   node bench/node/soak_room.mjs --url ws://.../ws/sync/ --room ID
//        --token T --clients 4 --interval-ms 250 --seconds 60
import { performance } from "node:perf_hooks";
import { joinedClient, parseArgs, sleep } from "./clients.mjs";

const args = parseArgs(process.argv.slice(2));
const n = Number(args.clients ?? 4);
const intervalMs = Number(args["interval-ms"] ?? 250);
const seconds = Number(args.seconds ?? 60);

const clients = [];
for (let i = 0; i < n; i++) {
  clients.push(
    await joinedClient({ url: args.url, roomId: args.room, token: args.token, peerId: 900 + i }),
  );
}
const samples = [];
const failures = [];
const stopAt = performance.now() + seconds * 1000;

async function edit(c, i) {
  const text = c.doc.getText("content");
  let k = 0;
  while (performance.now() < stopAt) {
    const started = performance.now();
    text.insert(0, `c${i}.${k++};`);
    c.doc.commit();
    try {
      await c.acked(30000);
      samples.push(performance.now() - started);
    } catch (err) {
      failures.push(String(err));
    }
    const rest = intervalMs - (performance.now() - started);
    if (rest > 0) await sleep(rest);
  }
}

await Promise.all(clients.map((c, i) => edit(c, i)));
samples.sort((a, b) => a - b);
const pick = (q) => (samples.length ? samples[Math.min(samples.length - 1, Math.floor(q * samples.length))] : null);
console.log(
  JSON.stringify({
    edits: samples.length,
    p50: pick(0.5),
    p95: pick(0.95),
    refused: clients.reduce((sum, c) => sum + c.errors.length, 0),
    failures: failures.length,
    first_failure: failures[0] ?? null,
  }),
);
await Promise.all(clients.map((c) => c.close()));
process.exit(0);
