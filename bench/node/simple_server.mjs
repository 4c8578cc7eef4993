// The reference server: loro-websocket's in-memory SimpleServer (stores nothing).
//   node bench/node/simple_server.mjs PORT
import { SimpleServer } from "loro-websocket/server";

const port = Number(process.argv[2]);
const server = new SimpleServer({ port, host: "127.0.0.1" });
await server.start();
console.log(`listening ${port}`);
const stop = async () => {
  await server.stop();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
