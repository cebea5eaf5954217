// Stand-in for @helmr/sdk's bin/helmr-bundle.mjs with the same command line
// (`helmr-bundle.mjs --out OUT.mjs DIR`): it copies DIR/agent.mjs, which is
// already one self-contained ES module, to OUT.mjs. A copy of node-raw
// depends on this stand-in package (file:), so npm installs it as
// node_modules/@helmr/sdk; the real bundler is tested by the TypeScript
// agents' tests.
import fs from "node:fs";
import path from "node:path";

const args = process.argv.slice(2);
const i = args.indexOf("--out");
if (i < 0 || i + 1 >= args.length || args.length !== 3) {
  console.error("usage: helmr-bundle.mjs --out OUT.mjs DIR");
  process.exit(1);
}
const out = args[i + 1];
const dir = args.filter((_, j) => j !== i && j !== i + 1)[0];
try {
  fs.copyFileSync(path.join(dir, "agent.mjs"), out);
} catch (e) {
  console.error(`helmr-bundle: ${e.message}`);
  process.exit(1);
}
