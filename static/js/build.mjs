// Bundles each page script, static/js/src/*.js, into static/dist/ (ES
// modules) and copies the Loro wasm next to them.  Modules the scripts share
// (static/js/src/lib/) go into common chunks, so the scripts of one page use
// one instance of each: one socket registry per page.  Run by `make assets`
// (part of `make run` / `make test`).
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const src = join(root, "static", "js", "src");
const out = join(root, "static", "dist");
// Chunks are named by content hash: clear the old ones out.
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const entryPoints = readdirSync(src)
  .filter((name) => name.endsWith(".js"))
  .map((name) => join(src, name));

await build({
  entryPoints,
  outdir: out,
  bundle: true,
  format: "esm",
  splitting: true,
  chunkNames: "chunks/[name]-[hash]",
  target: "es2020",
  minify: true,
  sourcemap: true,
  logLevel: "warning",
  // One Loro module for the editor, loro-codemirror and loro-websocket: the
  // "web" build, which fetches its wasm after `await init()`.
  alias: { "loro-crdt": "loro-crdt/web" },
});
copyFileSync(
  join(root, "node_modules", "loro-crdt", "web", "loro_wasm_bg.wasm"),
  join(out, "loro_wasm_bg.wasm"),
);
console.log(`built ${entryPoints.length} bundle(s) into static/dist/`);
