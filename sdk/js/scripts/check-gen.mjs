// Fails when src/gen/ is not what protoc-gen-es makes of wire/pb/inboxd.proto
// now (regenerated into a temporary directory with buf, then compared).
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const tmp = mkdtempSync(join(tmpdir(), "inboxd-gen-"));
try {
  const conf = readFileSync(join(root, "buf.gen.yaml"), "utf8").replace(/out: src\/gen/, `out: ${join(tmp, "gen")}`);
  writeFileSync(join(tmp, "buf.gen.yaml"), conf.replace("directory: ../../wire/pb", `directory: ${resolve(root, "../../wire/pb")}`));
  const bin = join(root, "node_modules/.bin");
  execFileSync(join(bin, "buf"), ["generate", "--template", join(tmp, "buf.gen.yaml")], {
    cwd: root,
    stdio: "inherit",
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
  });
  const want = readdirSync(join(tmp, "gen")).sort();
  const have = readdirSync(join(root, "src/gen")).sort();
  if (want.join() !== have.join()) throw new Error(`src/gen holds ${have}, the generator makes ${want}: run \`npm run gen\``);
  for (const f of want) {
    if (readFileSync(join(tmp, "gen", f), "utf8") !== readFileSync(join(root, "src/gen", f), "utf8")) {
      throw new Error(`src/gen/${f} differs from what wire/pb/inboxd.proto generates: run \`npm run gen\` in sdk/js and commit it`);
    }
  }
  console.log("src/gen matches wire/pb/inboxd.proto");
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
