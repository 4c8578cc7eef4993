// Drives co-editing servers with real loro-websocket clients and prints JSON
// figures per server (bench/coedit.py runs it against our server and
// SimpleServer together).
//
//   node bench/node/coedit_driver.mjs --clients 4 --edits 200 --seconds 5
//        --warmup 20 [--procs 1] --servers '[{"name": "ours", "url": "ws://...",
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
//
// With --procs P > 1 the clients are dealt out over P processes (client i
// lives in process i % P; this one is process 0 and holds the writers), so
// that one process applying every relayed change to 63 documents does not
// make the clients the bottleneck.  Times are taken on the shared wall clock
// (performance.timeOrigin + performance.now()) and reported to process 0.
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import { joinedClient, parseArgs, waitFor } from "./clients.mjs";

const args = parseArgs(process.argv.slice(2));
const n = Number(args.clients ?? 4);
const edits = Number(args.edits ?? 200);
const warmup = Number(args.warmup ?? 20);
const seconds = Number(args.seconds ?? 5);
const procs = Math.max(1, Math.min(n, Number(args.procs ?? 1)));
const me = Number(args.proc ?? 0);
const container = args.container ?? "content";
const servers = JSON.parse(args.servers);
const clock = () => performance.timeOrigin + performance.now();

// This process's clients of one room: client i for i % procs == me.
async function joinedRoom({ url, room, token }, onSeen) {
  const clients = new Map();
  for (let i = me; i < n; i += procs) {
    clients.set(i, await joinedClient({ url, roomId: room, token, peerId: 500 + i }));
  }
  // Receivers detect a turn's marker through the document's change events.
  const state = { clients, seen: new Map(), expecting: null };
  for (const [i, c] of clients) {
    c.doc.subscribe(() => {
      const marker = state.expecting;
      const key = `${marker}#${i}`;
      if (marker && !state.seen.has(key) && c.doc.getText(container).toString().includes(marker)) {
        state.seen.set(key, clock());
        onSeen(i, marker);
      }
    });
  }
  return state;
}

// Acked edits of this process's clients; a client whose ack does not come
// stops and its error is kept, so the latency figures are printed anyway.
async function sustained({ clients }, errors) {
  const stopAt = performance.now() + seconds * 1000;
  let acked = 0;
  await Promise.all(
    [...clients].map(async ([i, c]) => {
      let k = 0;
      try {
        while (performance.now() < stopAt) {
          const text = c.doc.getText(container);
          text.insert(0, `s${i}.${k++};`);
          c.doc.commit();
          await c.acked(20000);
          acked += 1;
        }
      } catch (error) {
        errors.push(`sustained phase: ${error}`);
      }
    }),
  );
  return acked;
}

if (me > 0) {
  // A worker: joins its clients, reports what they see, edits on request.
  const rooms = [];
  for (const [k, server] of servers.entries()) {
    rooms.push(
      await joinedRoom(server, (i, marker) => {
        process.send({ type: "seen", server: k, i, marker, t: rooms[k].seen.get(`${marker}#${i}`) });
      }),
    );
  }
  process.on("message", async (msg) => {
    if (msg.type === "expect") {
      rooms[msg.server].expecting = msg.marker;
      // Already there (a relayed change can beat the announcement).
      for (const [i, c] of rooms[msg.server].clients) {
        const key = `${msg.marker}#${i}`;
        if (!rooms[msg.server].seen.has(key) && c.doc.getText(container).toString().includes(msg.marker)) {
          rooms[msg.server].seen.set(key, clock());
          process.send({ type: "seen", server: msg.server, i, marker: msg.marker, t: rooms[msg.server].seen.get(key) });
        }
      }
      process.send({ type: "expecting", server: msg.server, marker: msg.marker });
    } else if (msg.type === "sustain") {
      const failed = [];
      const acked = await sustained(rooms[msg.server], failed);
      const errors = [...rooms[msg.server].clients.values()].flatMap((c) => c.errors);
      process.send({ type: "sustained", server: msg.server, acked, errors: errors.concat(failed) });
    } else if (msg.type === "close") {
      await Promise.all(rooms.flatMap((state) => [...state.clients.values()].map((c) => c.close())));
      process.exit(0);
    }
  });
  process.send({ type: "ready" });
} else {
  // Seen times of every receiving client, this process's and the workers'.
  const seenAt = servers.map(() => new Map());
  const rooms = [];
  for (const [k, server] of servers.entries()) {
    rooms.push(await joinedRoom(server, (i, marker) => seenAt[k].set(`${marker}#${i}`, rooms[k].seen.get(`${marker}#${i}`))));
  }
  const workers = [];
  const inbox = [];
  for (let p = 1; p < procs; p++) {
    const argv = process.argv.slice(2).filter((_, j, all) => all[j] !== "--proc" && all[j - 1] !== "--proc");
    const worker = fork(fileURLToPath(import.meta.url), [...argv, "--proc", String(p)], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
    worker.on("message", (msg) => {
      if (msg.type === "seen") seenAt[msg.server].set(`${msg.marker}#${msg.i}`, msg.t);
      else inbox.push(msg);
    });
    workers.push(worker);
  }
  const received = (type, count, server) => inbox.filter((m) => m.type === type && (server === undefined || m.server === server)).length >= count;
  await waitFor(() => received("ready", procs - 1), 600000, "the driver's workers");
  const samples = servers.map(() => []);
  const writers = [...rooms[0].clients.keys()];

  async function turn(k, t, marker, timed) {
    const state = rooms[k];
    const writerIndex = writers[t % writers.length];
    const writer = state.clients.get(writerIndex);
    state.expecting = marker;
    inbox.length = 0;
    for (const worker of workers) worker.send({ type: "expect", server: k, marker });
    await waitFor(() => received("expecting", workers.length, k), 10000, `workers expecting ${marker}`);
    const text = writer.doc.getText(container);
    const start = clock();
    text.insert(text.length, marker);
    writer.doc.commit();
    const others = [...Array(n).keys()].filter((i) => i !== writerIndex);
    await waitFor(() => others.every((i) => seenAt[k].has(`${marker}#${i}`)), 10000, `turn ${marker}`);
    if (timed) for (const i of others) samples[k].push(seenAt[k].get(`${marker}#${i}`) - start);
    await writer.acked();
    state.expecting = null;
  }

  for (let t = 0; t < warmup + edits; t++) {
    const timed = t >= warmup;
    const marker = timed ? `|${t - warmup}|` : `|w${t}|`;
    const order = t % 2 === 0 ? [...servers.keys()] : [...servers.keys()].reverse();
    for (const k of order) await turn(k, t, marker, timed);
  }

  const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
  const figures = {};
  for (const [k, server] of servers.entries()) {
    const sorted = [...samples[k]].sort((a, b) => a - b);
    inbox.length = 0;
    for (const worker of workers) worker.send({ type: "sustain", server: k });
    const begun = performance.now();
    const failed = [];
    let acked = await sustained(rooms[k], failed);
    await waitFor(() => received("sustained", workers.length, k), 120000, "sustained phase");
    const done = inbox.filter((m) => m.type === "sustained" && m.server === k);
    acked += done.reduce((sum, m) => sum + m.acked, 0);
    figures[server.name] = {
      clients: n,
      samples: sorted.length,
      p50: percentile(sorted, 50),
      p95: percentile(sorted, 95),
      p99: percentile(sorted, 99),
      edits_per_s: acked / ((performance.now() - begun) / 1000),
      errors: [...rooms[k].clients.values()]
        .flatMap((c) => c.errors)
        .concat(failed, done.flatMap((m) => m.errors)),
    };
  }
  console.log(JSON.stringify(figures));
  for (const worker of workers) worker.send({ type: "close" });
  await Promise.all(rooms.flatMap((state) => [...state.clients.values()].map((c) => c.close())));
  process.exit(0);
}
