/**
 * `@helmr/sdk/testing`: runs a real control plane on an agent package for
 * tests, on a free loopback port with a temporary data directory, and gives a
 * connected HelmrClient.
 *
 *   const h = await startHelmr({ dir: "." })
 *   try { ... h.client.sessions.create(...) ... } finally { await h.close() }
 */
import { spawn, execFile } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import { createServer } from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { HelmrClient, APIError } from "./client/index.js"
import type { Deployment } from "./client/types.js"

export interface StartOptions {
  /** The agent package (a directory with package.json and agents/). */
  readonly dir: string
  /** The helmr binary. Default: env HELMR_BIN, else `helmr` on PATH. */
  readonly bin?: string
  /**
   * `"dev"` (default) runs `helmr dev DIR`, which bundles and redeploys the
   * package itself. `"server"` runs `helmr server` and publishes the bundle
   * made by this SDK's bundler (POST /v1/deployments).
   */
  readonly mode?: "dev" | "server"
  /** Keep the data directory after close (for debugging). */
  readonly keepData?: boolean
  /** How long to wait for the control plane and the first Deployment. Default 120 s. */
  readonly timeoutMs?: number
  /** Extra arguments for helmr (e.g. `--unsafe-no-sandbox`). Default: env HELMR_TEST_ARGS split on spaces. */
  readonly args?: readonly string[]
  /** Extra environment for the control plane. */
  readonly env?: Readonly<Record<string, string>>
}

/** A running control plane. */
export interface Helmr {
  readonly client: HelmrClient
  readonly url: string
  readonly apiKey: string
  readonly dataDir: string
  /** The Deployment the agents run on. */
  readonly deployment: Deployment
  /** Everything the control plane wrote to stdout and stderr so far. */
  logs(): string
  /** Stops the control plane (SIGTERM, then SIGKILL after 15 s) and removes the data directory. */
  close(): Promise<void>
  /** Kills the control plane with SIGKILL (session processes live on) and starts it again on the same data and port. */
  restart(options?: { kill?: boolean }): Promise<void>
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/** Bundles a package with this SDK's bundler into `out`. */
export function bundle(dir: string, out: string): Promise<void> {
  const bundler = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "bin", "helmr-bundle.mjs")
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [bundler, "--out", out, dir], { timeout: 120_000 }, (err, _stdout, stderr) => {
      if (err) reject(new Error(`helmr-bundle ${dir}: ${stderr.trim() || err.message}`))
      else resolve()
    })
  })
}

/** Runs a bundle with `--helmr-manifest` under this Node and returns the manifest it prints. */
export function printManifest(bundlePath: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [bundlePath, "--helmr-manifest"], { timeout: 30_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${bundlePath} --helmr-manifest: ${stderr.trim() || err.message}`))
      else resolve(stdout)
    })
  })
}

/** Starts a control plane on the package and waits until its agents are deployed. */
export async function startHelmr(options: StartOptions): Promise<Helmr> {
  const dir = path.resolve(options.dir)
  const bin = options.bin ?? process.env.HELMR_BIN ?? "helmr"
  const mode = options.mode ?? "dev"
  const timeoutMs = options.timeoutMs ?? 120_000
  const extra = options.args ?? (process.env.HELMR_TEST_ARGS ? process.env.HELMR_TEST_ARGS.split(" ").filter(Boolean) : [])
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "helmr-test-"))
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  let log = ""
  let child: ChildProcess | undefined
  let exited: Promise<void> = Promise.resolve()

  const launch = () => {
    const args = mode === "dev"
      ? ["dev", "--addr", `127.0.0.1:${port}`, "--data-dir", dataDir, ...extra, dir]
      : ["server", "--addr", `127.0.0.1:${port}`, "--data-dir", dataDir, "--api-key-file", path.join(dataDir, "api-key"), ...extra]
    const c = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...options.env } })
    c.stdout!.on("data", (b: Buffer) => { log += b.toString() })
    c.stderr!.on("data", (b: Buffer) => { log += b.toString() })
    exited = new Promise((resolve) => {
      c.once("exit", () => resolve())
      c.once("error", (e) => { log += `\nspawn ${bin}: ${e.message}\n`; resolve() })
    })
    child = c
  }

  const waitReady = async (deadline: number): Promise<string> => {
    const keyFile = path.join(dataDir, "api-key")
    for (;;) {
      if (child?.exitCode !== null || child?.signalCode) throw new Error(`helmr ${mode} exited before it was ready:\n${log}`)
      if (Date.now() > deadline) throw new Error(`helmr ${mode} was not ready within ${timeoutMs} ms:\n${log}`)
      if (fs.existsSync(keyFile)) {
        const key = fs.readFileSync(keyFile, "utf8").trim()
        try {
          const r = await fetch(`${url}/readyz`)
          if (r.ok && key) return key
        } catch { /* not listening yet */ }
      }
      await sleep(50)
    }
  }

  launch()
  const deadline = Date.now() + timeoutMs
  try {
    const apiKey = await waitReady(deadline)
    const client = new HelmrClient({ baseUrl: url, apiKey })
    if (mode === "server") {
      const out = path.join(dataDir, "bundle.mjs")
      await bundle(dir, out)
      // The upload names its runtime in the manifest part (as helmr deploy
      // does): the server runs a bundle with node only when told so.
      const manifest = await printManifest(out)
      await client.deployments.create({ binary: fs.readFileSync(out), manifest })
    }
    let deployment: Deployment
    for (;;) {
      try {
        deployment = await client.deployments.get("current")
        break
      } catch (e) {
        if (!(e instanceof APIError) || (e.code !== "no_deployment" && e.code !== "not_found")) throw e
      }
      if (child?.exitCode !== null) throw new Error(`helmr ${mode} exited:\n${log}`)
      if (Date.now() > deadline) throw new Error(`no Deployment within ${timeoutMs} ms:\n${log}`)
      await sleep(100)
    }
    const stop = async (sig: NodeJS.Signals) => {
      if (!child || child.exitCode !== null || child.signalCode) return
      child.kill(sig)
      const t = setTimeout(() => child?.kill("SIGKILL"), 15_000)
      await exited
      clearTimeout(t)
    }
    return {
      client, url, apiKey, dataDir, deployment,
      logs: () => log,
      async close() {
        await stop("SIGTERM")
        if (!options.keepData) fs.rmSync(dataDir, { recursive: true, force: true })
      },
      async restart(o = {}) {
        await stop(o.kill === false ? "SIGTERM" : "SIGKILL")
        launch()
        await waitReady(Date.now() + timeoutMs)
      },
    }
  } catch (e) {
    child?.kill("SIGKILL")
    await exited
    if (!options.keepData) fs.rmSync(dataDir, { recursive: true, force: true })
    throw e
  }
}
