// Test helpers: a fake control plane that speaks the session protocol on a
// Unix socket, and a bundle of the fixture package.
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import { createServer } from "node:http"
import type { Server } from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { WebSocketServer, WebSocket } from "ws"
import { bundle } from "@helmr/sdk/testing"

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..")
export const fixture = path.join(root, "test", "fixtures", "pkg")
/** A package with one Agent fired every second by a cron trigger. */
export const cronFixture = path.join(root, "test", "fixtures", "cron")

/** Links the SDK into a fixture's node_modules, as npm would. */
export function linkFixture(dir = fixture): void {
  const link = path.join(dir, "node_modules", "@helmr", "sdk")
  if (!fs.existsSync(link)) {
    fs.mkdirSync(path.dirname(link), { recursive: true })
    fs.symlinkSync(path.relative(path.dirname(link), root), link)
  }
}

let bundled: Promise<string> | undefined
/** Bundles the fixture package once per test file. */
export function fixtureBundle(): Promise<string> {
  linkFixture()
  bundled ??= (async () => {
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "helmr-bundle-")), "agents.mjs")
    await bundle(fixture, out)
    return out
  })()
  return bundled
}

export type Msg = Record<string, any>

/** One accepted process connection. */
export class Peer {
  readonly inbox: Msg[] = []
  private waiters: Array<() => void> = []
  closed: { code: number; reason: string } | undefined
  /** When the connection was accepted (Date.now()). */
  readonly acceptedAt = Date.now()
  constructor(readonly ws: WebSocket, readonly auth: string | undefined, readonly protocol: string) {
    ws.on("message", (d) => { this.inbox.push(JSON.parse(d.toString())); this.poke() })
    ws.on("close", (code, reason) => { this.closed = { code, reason: reason.toString() }; this.poke() })
  }
  private poke() { for (const w of this.waiters.splice(0)) w() }
  send(m: Msg) { this.ws.send(JSON.stringify(m)) }
  /** The next message (in order) matching pred, removing it and everything before it that does not match is kept. */
  async next(pred: (m: Msg) => boolean = () => true, ms = 15_000): Promise<Msg> {
    const deadline = Date.now() + ms
    for (;;) {
      const i = this.inbox.findIndex(pred)
      if (i >= 0) return this.inbox.splice(i, 1)[0]
      if (this.closed) throw new Error(`connection closed (${this.closed.code}) while waiting; inbox: ${JSON.stringify(this.inbox)}`)
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`timed out waiting; inbox: ${JSON.stringify(this.inbox)}`)
      await new Promise<void>((r) => { this.waiters.push(r); setTimeout(r, left) })
    }
  }
  type(t: string, ms?: number) { return this.next((m) => m.type === t, ms) }
  async waitClosed(ms = 15_000) {
    const deadline = Date.now() + ms
    while (!this.closed && Date.now() < deadline) await new Promise<void>((r) => { this.waiters.push(r); setTimeout(r, 100) })
    return this.closed
  }
}

/** A fake control plane on a Unix socket. */
export class FakeServer {
  readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), "helmr-fake-"))
  readonly socket = path.join(this.dir, "s.sock")
  readonly token = "hlmr_proc_" + "ab".repeat(24)
  private http!: Server
  private wss!: WebSocketServer
  private peers: Peer[] = []
  private waiters: Array<() => void> = []
  proc: ChildProcess | undefined
  /** HTTP statuses that answer the next upgrades, one each (taken off as answered), instead of accepting them. */
  refusals: number[] = []
  output = ""
  exit: Promise<number | null> = Promise.resolve(null)

  async listen(): Promise<void> {
    this.http = createServer()
    this.wss = new WebSocketServer({ noServer: true, handleProtocols: (p) => (p.has("helmr.session.v1") ? "helmr.session.v1" : false) })
    this.http.on("upgrade", (req, sock, head) => {
      const status = this.refusals.shift()
      if (status !== undefined) {
        // Answered before the upgrade, as a control plane that has not yet
        // adopted the process (or does not know its token) answers.
        sock.end(`HTTP/1.1 ${status} Refused\r\nContent-Type: text/plain\r\nContent-Length: 7\r\nConnection: close\r\n\r\nrefused`)
        return
      }
      this.wss.handleUpgrade(req, sock, head, (ws) => {
        this.peers.push(new Peer(ws, req.headers.authorization, ws.protocol))
        for (const w of this.waiters.splice(0)) w()
      })
    })
    await new Promise<void>((r) => this.http.listen(this.socket, r))
  }

  /** The n-th connection (0-based), waiting for it. */
  async peer(n = 0, ms = 15_000): Promise<Peer> {
    const deadline = Date.now() + ms
    while (this.peers.length <= n) {
      if (Date.now() > deadline) throw new Error(`no connection #${n}; process output:\n${this.output}`)
      await new Promise<void>((r) => { this.waiters.push(r); setTimeout(r, 200) })
    }
    return this.peers[n]
  }

  /** Starts the bundle for agent, passing the credential through fd 3. */
  start(bundlePath: string, agent: string, env: Record<string, string> = {}): ChildProcess {
    const p = spawn(process.execPath, [bundlePath], {
      env: { PATH: process.env.PATH ?? "", HELMR_SESSION_SOCKET: this.socket, HELMR_SESSION_TOKEN_FD: "3", HELMR_AGENT: agent, ...env },
      stdio: ["ignore", "pipe", "pipe", "pipe"],
    })
    const fd3 = p.stdio[3] as NodeJS.WritableStream
    fd3.end(this.token)
    p.stdout!.on("data", (b) => { this.output += b })
    p.stderr!.on("data", (b) => { this.output += b })
    this.exit = new Promise((r) => p.once("exit", (code) => r(code)))
    this.proc = p
    return p
  }

  /** Accepts the handshake on connection n: hello → welcome. */
  async handshake(n = 0, welcome: Msg = {}): Promise<{ peer: Peer; hello: Msg }> {
    const peer = await this.peer(n)
    const hello = await peer.type("hello")
    peer.send({ type: "welcome", welcome: { agent: "", session_id: "s-1", computer_id: "c-1", deployment_id: "d-1", recovery: { kind: "initial" }, server_time: new Date().toISOString(), ...welcome } })
    return { peer, hello }
  }

  /** Kills the process (if still running) and stops listening. */
  async close(): Promise<void> {
    if (this.proc && this.proc.exitCode === null && !this.proc.signalCode) { this.proc.kill("SIGKILL"); await this.exit }
    for (const p of this.peers) p.ws.terminate()
    this.wss.close()
    await new Promise<void>((r) => this.http.close(() => r()))
    fs.rmSync(this.dir, { recursive: true, force: true })
  }

  /** Stops accepting and drops every connection (a control-plane restart). */
  dropAll(): void {
    for (const p of this.peers) p.ws.terminate()
  }
}

/** A turn.start message. */
export function turnStart(id: string, input: unknown, extra: Msg = {}): Msg {
  return { type: "turn.start", turn_id: id, turn: { id, sequence: 1, created_at: new Date().toISOString(), input, source: { kind: "api_key" }, ...extra } }
}

export const text = (s: string) => [{ type: "text" as const, text: s }]

/**
 * The last n characters of a control plane's output for a failure message,
 * without its API key or its console login token (helmr dev prints both).
 */
export function logTail(h: { logs(): string; apiKey: string }, n: number): string {
  return h.logs().split(h.apiKey).join("[api key]").replace(/token=[0-9a-f]+/g, "token=[redacted]").slice(-n)
}
