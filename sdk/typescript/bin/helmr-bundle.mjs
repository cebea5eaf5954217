#!/usr/bin/env node
// @ts-check
/**
 * helmr-bundle: bundles a TypeScript (or JavaScript) Helmr package into one
 * ESM file that runs under Node 20+ with nothing beside it.
 *
 *   node DIR/node_modules/@helmr/sdk/bin/helmr-bundle.mjs --out OUT.mjs DIR
 *
 * It discovers the modules in the package's source directories (`agents` by
 * default; `"helmr": {"dirs": [...]}` in DIR/package.json), generates an entry
 * that imports them and starts the runtime with every exported agent()
 * definition, bundles it with esbuild (platform node, target node20, ESM,
 * everything inlined), makes OUT executable (`#!/usr/bin/env node`), and
 * checks it by running `node OUT --helmr-manifest`. Exit 0 on success; on
 * error a message on stderr and exit 1.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const sourceExt = /\.(ts|mts|cts|tsx|js|mjs|cjs|jsx)$/
const skip = /(\.d\.(ts|mts|cts)|\.(test|spec)\.[cm]?[jt]sx?)$/

/** @param {string} msg @returns {never} */
function fail(msg) {
  process.stderr.write(`helmr-bundle: ${msg}\n`)
  process.exit(1)
}

/** @param {string[]} argv @returns {{out: string, dir: string}} */
function parseArgs(argv) {
  let out = "", dir = ""
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === "--out" || a === "-o") out = argv[++i] ?? ""
    else if (a.startsWith("--out=")) out = a.slice(6)
    else if (a === "--help" || a === "-h") {
      process.stdout.write("usage: helmr-bundle --out OUT.mjs DIR\n")
      process.exit(0)
    } else if (a.startsWith("-")) fail(`unknown flag ${a}; usage: helmr-bundle --out OUT.mjs DIR`)
    else if (dir) fail(`one package directory only (got ${dir} and ${a})`)
    else dir = a
  }
  if (!out || !dir) fail("usage: helmr-bundle --out OUT.mjs DIR")
  return { out: path.resolve(out), dir: path.resolve(dir) }
}

/** The source directories: package.json `helmr.dirs`, default ["agents"]. @param {string} dir */
function sourceDirs(dir) {
  const pj = path.join(dir, "package.json")
  if (!fs.existsSync(pj)) fail(`${dir} has no package.json`)
  /** @type {any} */
  let pkg
  try {
    pkg = JSON.parse(fs.readFileSync(pj, "utf8"))
  } catch (e) {
    fail(`${pj}: ${/** @type {Error} */ (e).message}`)
  }
  const dirs = pkg?.helmr?.dirs ?? ["agents"]
  if (!Array.isArray(dirs) || dirs.length === 0 || dirs.some((d) => typeof d !== "string" || d === "")) {
    fail(`${pj}: "helmr.dirs" must be a non-empty array of directory names`)
  }
  return dirs.map((d) => {
    const abs = path.resolve(dir, d)
    if (path.relative(dir, abs).startsWith("..")) fail(`${pj}: helmr.dirs entry ${JSON.stringify(d)} is outside the package`)
    return abs
  })
}

/** Every source file under dir, sorted. @param {string} dir @returns {string[]} */
function walk(dir) {
  /** @type {string[]} */
  const out = []
  for (const e of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    if (e.name.startsWith(".") || e.name === "node_modules" || e.name === "__tests__") continue
    const p = path.join(dir, e.name)
    if (e.isDirectory()) out.push(...walk(p))
    else if (e.isFile() && sourceExt.test(e.name) && !skip.test(e.name)) out.push(p)
  }
  return out
}

async function main() {
  const { out, dir } = parseArgs(process.argv.slice(2))
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) fail(`${dir} is not a directory`)
  const files = []
  for (const d of sourceDirs(dir)) {
    if (!fs.existsSync(d)) continue
    files.push(...walk(d))
  }
  if (files.length === 0) fail(`no agent sources in ${dir}: put modules exporting agent() definitions in ${sourceDirs(dir).map((d) => path.relative(dir, d) + "/").join(", ")}`)

  /** @type {typeof import("esbuild")} */
  let esbuild
  try {
    esbuild = await import("esbuild")
  } catch (e) {
    fail(`esbuild is not installed (run npm ci in ${dir}): ${/** @type {Error} */ (e).message}`)
  }
  const sdkRuntime = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "src", "runtime.ts")
  const sdkPrelude = path.join(path.dirname(sdkRuntime), "prelude.ts")
  const entry = [
    // First: the credential leaves the environment before agent modules run.
    `import ${JSON.stringify(sdkPrelude)}`,
    ...files.map((f, i) => `import * as m${i} from ${JSON.stringify(f)}`),
    `import { run, collectAgents } from ${JSON.stringify(sdkRuntime)}`,
    `await run(collectAgents([${files.map((_, i) => `m${i}`).join(", ")}]))`,
    "",
  ].join("\n")
  fs.mkdirSync(path.dirname(out), { recursive: true })
  try {
    await esbuild.build({
      stdin: { contents: entry, resolveDir: dir, sourcefile: "helmr-entry.mjs", loader: "js" },
      absWorkingDir: dir,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      outfile: out,
      conditions: ["helmr-source"],
      external: ["bufferutil", "utf-8-validate"],
      banner: { js: "#!/usr/bin/env node\nimport { createRequire as __helmrCreateRequire } from \"node:module\";\nconst require = __helmrCreateRequire(import.meta.url);" },
      logLevel: "silent",
      legalComments: "none",
      write: true,
    })
  } catch (e) {
    const errs = /** @type {{errors?: Array<{text: string, location?: {file: string, line: number, column: number}}>}} */ (e).errors
    const text = errs?.length
      ? errs.map((x) => (x.location ? `${x.location.file}:${x.location.line}:${x.location.column}: ` : "") + x.text).join("\n")
      : String(/** @type {Error} */ (e)?.message ?? e)
    fail(`bundling failed:\n${text}`)
  }
  fs.chmodSync(out, 0o755)
  // The bundle must print its manifest, as the control plane will ask it to.
  await new Promise((resolve) => {
    execFile(process.execPath, [out, "--helmr-manifest"], { timeout: 30_000, env: { PATH: process.env.PATH ?? "" }, cwd: path.dirname(out) }, (err, stdout, stderr) => {
      if (err) {
        fs.rmSync(out, { force: true })
        fail(`the bundle does not print its manifest (${err.message.split("\n")[0]}):\n${stderr.trim()}`)
      }
      try {
        const m = JSON.parse(stdout)
        if (!Array.isArray(m.agents) || m.agents.length === 0) throw new Error("no agents")
      } catch (e) {
        fs.rmSync(out, { force: true })
        fail(`the bundle printed no valid manifest: ${/** @type {Error} */ (e).message}`)
      }
      resolve(undefined)
    })
  })
}

main().catch((e) => fail(String(e?.stack ?? e)))
