// Builds the SDK: a type check (tsc, declarations in dist/types), the
// browser bundle dist/inboxd-sdk.js (one self-contained ES module), the Node
// entry dist/node.js (`ws` stays an import) and dist/internal.js (what
// the unit tests reach inside: src/internal.ts). `node scripts/build.mjs --bundle
// PATH [--minify]` writes only the browser bundle, to PATH.
import { build } from "esbuild";
import { execFileSync } from "node:child_process";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const browser = {
  entryPoints: [resolve(root, "src/index.ts")],
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  sourcemap: false,
  legalComments: "none",
  banner: { js: "// @inboxd/sdk browser bundle (generated from sdk/js by `npm run bundle`; do not edit)" },
  logLevel: "warning",
};

const i = process.argv.indexOf("--bundle");
if (i >= 0) {
  const out = process.argv[i + 1];
  if (!out || out.startsWith("--")) throw new Error("usage: node scripts/build.mjs --bundle PATH [--minify]");
  // `npm run bundle -- PATH` runs in sdk/js: PATH is relative to where npm was started.
  const path = resolve(process.env.INIT_CWD ?? process.cwd(), out);
  await build({ ...browser, outfile: path, minify: process.argv.includes("--minify") });
  console.log(`wrote ${path}`);
} else {
  execFileSync(resolve(root, "node_modules/.bin/tsc"), ["-p", root], { stdio: "inherit" });
  await build({ ...browser, outfile: resolve(root, "dist/inboxd-sdk.js") });
  await build({ ...browser, entryPoints: [resolve(root, "src/node.ts")], platform: "node", external: ["ws"], outfile: resolve(root, "dist/node.js") });
  await build({ ...browser, entryPoints: [resolve(root, "src/internal.ts")], platform: "node", outfile: resolve(root, "dist/internal.js") });
}
