// The bundler's contract: `node helmr-bundle.mjs --out OUT.mjs DIR` → exit 0
// and OUT.mjs written; on error a message on stderr and exit 1.
import assert from "node:assert/strict"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { test } from "node:test"
import { fixture, linkFixture, root } from "./helpers.js"

const bundler = path.join(root, "bin", "helmr-bundle.mjs")
const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "helmr-bundler-"))

function bundleDir(dir: string, out: string) {
  return spawnSync(process.execPath, [bundler, "--out", out, dir], { encoding: "utf8" })
}

/** A package in a temp dir with the SDK linked and the given agent files. */
function pkg(files: Record<string, string>, pj: Record<string, unknown> = { type: "module" }): string {
  const dir = tmp()
  fs.writeFileSync(path.join(dir, "package.json"), JSON.stringify(pj))
  fs.mkdirSync(path.join(dir, "node_modules", "@helmr"), { recursive: true })
  fs.symlinkSync(root, path.join(dir, "node_modules", "@helmr", "sdk"))
  for (const [name, body] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true })
    fs.writeFileSync(path.join(dir, name), body)
  }
  return dir
}

const agentSrc = `import { agent, template, image } from "@helmr/sdk"
export const a = agent({ id: "a", template: template({ id: "t", image: image("t").fromHost() }), async turn() { return 1 } })
export default a
`

test("the bundle is one executable ESM file that runs with no node_modules beside it", () => {
  linkFixture()
  const out = path.join(tmp(), "sub", "agents.mjs")
  const r = bundleDir(fixture, out)
  assert.equal(r.status, 0, r.stderr)
  assert.equal(fs.statSync(out).mode & 0o777, 0o755)
  assert.ok(fs.readFileSync(out, "utf8").startsWith("#!/usr/bin/env node\n"))
  const alone = path.join(tmp(), "agents.mjs")
  fs.copyFileSync(out, alone)
  const m = spawnSync(alone, ["--helmr-manifest"], { encoding: "utf8", env: { PATH: process.env.PATH ?? "" }, cwd: path.dirname(alone) })
  assert.equal(m.status, 0, m.stderr)
  const manifest = JSON.parse(m.stdout)
  assert.equal(manifest.sdk, "typescript")
  assert.ok(manifest.agents.some((a: { id: string }) => a.id === "counter"), "helmr.dirs adds more/")
  const notHelmr = spawnSync(alone, [], { encoding: "utf8", env: { PATH: process.env.PATH ?? "" } })
  assert.equal(notHelmr.status, 2)
  assert.match(notHelmr.stderr, /helmr dev/)
})

test("agents/ by default; tests and declaration files are skipped; a definition exported twice counts once", () => {
  const dir = pkg({ "agents/a.ts": agentSrc, "agents/a.test.ts": "throw new Error('not loaded')", "agents/x.d.ts": "export {}" })
  const out = path.join(dir, "out.mjs")
  const r = bundleDir(dir, out)
  assert.equal(r.status, 0, r.stderr)
  const m = JSON.parse(spawnSync(process.execPath, [out, "--helmr-manifest"], { encoding: "utf8" }).stdout)
  assert.deepEqual(m.agents.map((a: { id: string }) => a.id), ["a"])
})

test("errors: exit 1 with a message on stderr", () => {
  const cases: Array<[string, string, RegExp]> = [
    ["no such directory", path.join(tmp(), "nope"), /is not a directory/],
    ["no package.json", tmp(), /has no package.json/],
    ["no sources", pkg({}), /no agent sources/],
    ["a syntax error", pkg({ "agents/a.ts": "export const = 1" }), /bundling failed:[\s\S]*agents\/a\.ts:1:/],
    ["an unresolvable import", pkg({ "agents/a.ts": "import 'left-pad-nowhere'" }), /Could not resolve "left-pad-nowhere"/],
    ["no exported definitions", pkg({ "agents/a.ts": "export const x = 1" }), /does not print its manifest[\s\S]*no agents given/],
    ["a bad helmr.dirs", pkg({ "agents/a.ts": agentSrc }, { helmr: { dirs: "agents" } }), /helmr.dirs/],
    ["a definition that throws", pkg({ "agents/a.ts": agentSrc.replace('id: "a"', 'id: ""') }), /id must be a non-blank string/],
  ]
  for (const [name, dir, re] of cases) {
    const out = path.join(tmp(), "out.mjs")
    const r = bundleDir(dir, out)
    assert.equal(r.status, 1, name)
    assert.match(r.stderr, re, name)
    assert.ok(!fs.existsSync(out), `${name}: no output left behind`)
  }
  const usage = spawnSync(process.execPath, [bundler, "dir"], { encoding: "utf8" })
  assert.equal(usage.status, 1)
  assert.match(usage.stderr, /usage: helmr-bundle --out OUT.mjs DIR/)
})
