/**
 * The session protocol `helmr.session.v1` (docs/protocol.md): wire types and
 * the connection, with ops matched to acks by (turn_id, op), replay after a
 * reconnect within the reconnect window, and runtime MCP calls by call_id.
 */
import { randomBytes } from "node:crypto"
import { performance } from "node:perf_hooks"
import WebSocket from "ws"
import { parseDuration } from "./duration.js"
import type { ErrorBody } from "./errors.js"
import { HelmrError } from "./errors.js"

export const protocolVersion = "helmr.session.v1"
export const manifestFlag = "--helmr-manifest"
/** In hello's `features`: the process understands `park` (docs/protocol.md, "Parking"). */
export const featurePark = "park"

/** One protocol message; fields by type as in docs/protocol.md section 4. */
export interface Msg {
  type: string
  op?: number
  turn_id?: string
  protocol?: string
  pid?: number
  resume?: { ready: boolean; turn_id?: string }
  /** hello: what the process understands beyond the base protocol ("park"). */
  features?: string[]
  /** park: the process dials again no sooner than this Duration. */
  pause?: string
  welcome?: Welcome
  turn?: TurnStart
  message?: InboundMessage
  reason?: string
  content?: unknown[]
  message_id?: string
  status?: string
  result?: unknown
  response?: unknown[]
  error?: ErrorBody
  sequence?: number
  ask?: { id: string; question: unknown }
  token?: { id: string; secret: string; create: Record<string, unknown> }
  token_state?: Record<string, unknown>
  wait?: Record<string, unknown>
  wait_id?: string
  outcome?: WaitOutcome
  call_id?: string
  mcp?: { scope?: unknown; tool?: string; args?: unknown }
  spans?: Span[]
}

/** A finished span of a traced Turn, sent in a `spans` message (docs/protocol.md). */
export interface Span {
  span_id: string
  parent_span_id?: string
  name: string
  start: string
  end: string
  attributes?: Record<string, string | number | boolean>
  error?: string
}

export interface Welcome {
  agent: string
  session_id: string
  session_key?: string
  parent_session_id?: string
  computer_id: string
  deployment_id: string
  recovery: { kind: string; reason?: string }
  server_time?: string
}

export interface TurnStart {
  id: string
  sequence: number
  created_at: string
  input: unknown
  source: Record<string, unknown>
  deadline?: string
  /** The Turn span's W3C trace context, when the control plane traces the Turn. */
  traceparent?: string
}

export interface InboundMessage { id: string; content: unknown[]; source: Record<string, unknown> }

export interface WaitOutcome {
  status: "resolved" | "failed"
  value?: unknown
  responded_by?: { kind: string; id?: string }
  error?: ErrorBody
}

/** Opens the WebSocket to the protocol endpoint on a Unix socket. */
export function dial(socket: string, token: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws+unix://${socket}:/session`, [protocolVersion], {
      headers: { Authorization: `Bearer ${token}` },
      maxPayload: 32 << 20,
      handshakeTimeout: dialTimeoutMs,
      perMessageDeflate: false,
    })
    // terminate() before the upgrade emits one more "error" (the handshake
    // aborted): it is kept from being an uncaught error that ends the process
    // (a restarted control plane refuses a redial until it has adopted it).
    const fail = (err: Error) => { ws.removeAllListeners(); ws.on("error", () => {}); ws.terminate(); reject(err) }
    ws.once("open", () => { ws.removeListener("error", fail); resolve(ws) })
    ws.once("error", fail)
    ws.once("unexpected-response", (_req, res) => fail(new Error(`connect to the control plane: HTTP ${res.statusCode}`)))
  })
}

interface PendingOp { msg: Msg; resolve(m: Msg): void; reject(e: Error): void }

const lostError = () => new HelmrError("unavailable", "connection to the control plane lost")

/**
 * Reconnect timing (as the Go SDK's): each attempt waits its pause, dials
 * within dialTimeoutMs (dial's handshakeTimeout) and has helloTimeoutMs for
 * hello and welcome; it counts against the reconnect window the time it
 * took, never more than its pause + both timeouts + attemptMarginMs.
 */
const dialTimeoutMs = 5000
const helloTimeoutMs = 10_000
const attemptMarginMs = 1000
const firstBackoffMs = 50
const maxBackoffMs = 1000

/**
 * What one reconnect attempt that took `tookMs` (on the monotonic clock),
 * with pause `pauseMs`, counts against the reconnect window: so the window
 * counts the time the process ran while it tried, and a jump of the clock
 * while it was frozen or checkpointed counts for at most one attempt.
 */
export function attemptShareMs(tookMs: number, pauseMs: number): number {
  return Math.max(0, Math.min(tookMs, pauseMs + dialTimeoutMs + helloTimeoutMs + attemptMarginMs))
}

/** How often pauseFor looks at the wall clock, in milliseconds. */
const pauseStepMs = 20

/**
 * Waits `ms` by the wall clock, in short steps: a process checkpointed
 * during the pause and restored later (CRIU restores its monotonic clock as
 * it was) sees the pause over at once. As the Go SDK's pauseFor.
 */
export async function pauseFor(ms: number): Promise<void> {
  const end = Date.now() + ms
  for (let left = ms; left > 0; left = end - Date.now()) {
    await new Promise((r) => setTimeout(r, Math.min(left, pauseStepMs)))
  }
}

/** A park's pause in milliseconds: 0 when absent, undefined (the park is ignored) when not a Duration. */
export function parkPauseMs(pause: string | undefined): number | undefined {
  if (pause === undefined || pause === "") return 0
  try {
    return parseDuration(pause)
  } catch {
    return undefined
  }
}

/**
 * A connected session process. Everything the server sends goes to
 * `onServer`, except acks and mcp.result, which settle their callers.
 */
export class Connection {
  private ws: WebSocket
  private readonly pending = new Map<string, PendingOp>()
  private readonly calls = new Map<string, (m: Msg | null) => void>()
  private closedFor: Error | undefined
  private ending = false
  private handshaking = false
  /** The pause of a park being obeyed, from the park until its close. */
  private parkPause: number | undefined
  /** Set when the process stops (shutdown, signal): a park is then ignored. */
  stopping = false
  private readonly lostWaiters: Array<(e: Error) => void> = []
  /** Handles every server message that is not an ack or mcp.result. */
  onServer: (m: Msg) => void = () => {}
  /** Builds the resume of a reconnect's hello and names the waits to resume. */
  resumeState: () => { ready: boolean; turnId?: string; waits: Array<{ turnId: string; waitId: string }> } = () => ({ ready: false, waits: [] })

  constructor(ws: WebSocket, private readonly redial: (() => Promise<WebSocket>) | undefined, private readonly windowMs: number) {
    this.ws = ws
    this.attach(ws)
  }

  /** Sends hello and resolves with the welcome. A connection lost before the welcome is final. */
  async handshake(): Promise<Welcome> {
    this.handshaking = true
    const first = new Promise<Msg>((resolve, reject) => {
      const prev = this.onServer
      this.onServer = (m) => { this.onServer = prev; resolve(m) }
      this.onLost(reject)
    })
    this.write(this.hello())
    const m = await first.finally(() => { this.handshaking = false })
    if (m.type !== "welcome" || !m.welcome) throw new Error(`protocol: want welcome, got ${JSON.stringify(m.type)}`)
    return m.welcome
  }

  /** The process's hello; features only when it can dial again (park needs that). */
  private hello(resume?: { ready: boolean; turn_id?: string }): Msg {
    const m: Msg = { type: "hello", protocol: protocolVersion, pid: process.pid }
    if (resume) m.resume = resume
    if (this.redial) m.features = [featurePark]
    return m
  }

  /**
   * Obeys a park: nothing more is written (ops stay pending for the
   * rejoin), the connection closes with 1000 "parked", and the close
   * starts the reconnection after the pause. Ignored before the welcome,
   * with a pause that is not a Duration, when the process cannot dial
   * again, or when it is stopping.
   */
  private park(ws: WebSocket, m: Msg): void {
    const pause = parkPauseMs(m.pause)
    if (pause === undefined || ws !== this.ws || this.handshaking || !this.redial || this.ending || this.stopping || this.parkPause !== undefined) return
    this.parkPause = pause
    ws.close(1000, "parked")
  }

  /** Whether the connection is lost for good. */
  get closed(): boolean { return this.closedFor !== undefined }

  /** Calls fn once the connection is lost for good. */
  onLost(fn: (e: Error) => void): void {
    if (this.closedFor) fn(this.closedFor)
    else this.lostWaiters.push(fn)
  }

  /** Writes a message that expects no ack. Lost silently while reconnecting. */
  write(m: Msg): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(m))
  }

  /**
   * Registers an op for its ack and writes it. The caller numbers ops and
   * calls this synchronously, so ops reach the server in op order.
   */
  sendOp(m: Msg): Promise<Msg> {
    if (this.closedFor) return Promise.reject(lostError())
    const key = `${m.turn_id}/${m.op}`
    const p = new Promise<Msg>((resolve, reject) => this.pending.set(key, { msg: m, resolve, reject }))
    this.write(m)
    return p
  }

  /** Sends an mcp.scope or mcp.call and resolves with its result. */
  async call(m: Msg, signal?: AbortSignal): Promise<unknown> {
    const lost = new HelmrError("unavailable", "the connection to the control plane was lost during the call; it may or may not have taken effect: retry with the same idempotency_key")
    if (this.closedFor || this.ws.readyState !== WebSocket.OPEN) throw lost
    m.call_id = randomBytes(16).toString("hex")
    const id = m.call_id
    const r = await new Promise<Msg | null>((resolve, reject) => {
      const onAbort = () => { this.calls.delete(id); reject(signal?.reason ?? new Error("aborted")) }
      signal?.addEventListener("abort", onAbort, { once: true })
      this.calls.set(id, (x) => { signal?.removeEventListener("abort", onAbort); resolve(x) })
      this.write(m)
    })
    if (r === null) throw lost
    if (r.error) throw HelmrError.from(r.error)
    return r.result
  }

  /** Closes with 1000 (an orderly end). */
  close(): Promise<void> {
    this.ending = true
    return new Promise((resolve) => {
      if (this.ws.readyState === WebSocket.CLOSED) return resolve()
      const t = setTimeout(() => { this.ws.terminate(); resolve() }, 2000)
      this.ws.once("close", () => { clearTimeout(t); resolve() })
      this.ws.close(1000, "shutdown")
    })
  }

  private attach(ws: WebSocket): void {
    ws.on("message", (data, isBinary) => {
      if (isBinary) return
      let m: Msg
      try {
        m = JSON.parse(data.toString())
      } catch {
        return
      }
      if (typeof m !== "object" || m === null || typeof m.type !== "string") return
      if (m.type === "park") return this.park(ws, m)
      if (m.type === "ack") {
        const key = `${m.turn_id}/${m.op}`
        const p = this.pending.get(key)
        if (p) { this.pending.delete(key); p.resolve(m) }
        return
      }
      if (m.type === "mcp.result" && m.call_id) {
        const c = this.calls.get(m.call_id)
        if (c) { this.calls.delete(m.call_id); c(m) }
        return
      }
      this.onServer(m)
    })
    ws.on("error", () => {})
    ws.on("close", (code) => {
      if (ws !== this.ws) return
      const parked = this.parkPause
      this.parkPause = undefined
      if (parked !== undefined && !this.ending) void this.reconnect(parked)
      else if (!this.ending && !this.handshaking && this.redial && code !== 1008) void this.reconnect(firstBackoffMs)
      else this.lose(new Error(code === 1008 ? "the control plane refused this process (1008)" : "connection to the control plane closed"))
    })
  }

  private lose(err: Error): void {
    if (this.closedFor) return
    this.closedFor = err
    for (const p of this.pending.values()) p.reject(lostError())
    this.pending.clear()
    this.failCalls()
    for (const fn of this.lostWaiters.splice(0)) fn(err)
  }

  private failCalls(): void {
    const calls = [...this.calls.values()]
    this.calls.clear()
    for (const c of calls) c(null)
  }

  /**
   * Reconnects, then rejoins: the first attempt after `pauseMs` (a park's
   * pause, else 50 ms), later ones with backoff from 50 ms to 1 s, for the
   * reconnect window counted in running time (attemptShareMs).
   */
  private async reconnect(pauseMs: number): Promise<void> {
    let spent = 0
    let pause = pauseMs
    let backoff = firstBackoffMs
    this.failCalls()
    while (spent < this.windowMs && !this.ending) {
      const start = performance.now()
      await pauseFor(pause)
      let ws: WebSocket | undefined
      try {
        ws = await this.redial!()
      } catch {
        ws = undefined
      }
      if (ws) {
        if (await this.rejoin(ws)) return
        ws.terminate()
      }
      spent += attemptShareMs(performance.now() - start, pause)
      pause = backoff
      backoff = Math.min(backoff * 2, maxBackoffMs)
    }
    this.lose(new Error("connection to the control plane lost; no control plane came back within the reconnect window"))
  }

  private rejoin(ws: WebSocket): Promise<boolean> {
    const st = this.resumeState()
    return new Promise((resolve) => {
      const timer = setTimeout(() => { cleanup(); resolve(false) }, helloTimeoutMs)
      const cleanup = () => { clearTimeout(timer); ws.removeListener("message", onFirst); ws.removeListener("close", onClose) }
      const onClose = () => { cleanup(); resolve(false) }
      const onFirst = (data: WebSocket.RawData) => {
        let m: Msg
        try { m = JSON.parse(data.toString()) } catch { cleanup(); return resolve(false) }
        if (m?.type === "park") return // ignored before the welcome
        cleanup()
        if (m?.type !== "welcome") return resolve(false)
        this.ws = ws
        this.attach(ws)
        // Replay every op without an ack, in (turn_id, op) order.
        const ops = [...this.pending.values()].map((p) => p.msg)
        ops.sort((a, b) => (a.turn_id! < b.turn_id! ? -1 : a.turn_id! > b.turn_id! ? 1 : a.op! - b.op!))
        for (const op of ops) this.write(op)
        for (const w of st.waits) this.write({ type: "wait.resume", turn_id: w.turnId, wait_id: w.waitId })
        resolve(true)
      }
      ws.on("message", onFirst)
      ws.on("close", onClose)
      ws.on("error", () => {})
      const resume: { ready: boolean; turn_id?: string } = { ready: st.ready }
      if (st.turnId) resume.turn_id = st.turnId
      ws.send(JSON.stringify(this.hello(resume)))
    })
  }
}
