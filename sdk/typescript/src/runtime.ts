/**
 * The session process: `run(definitions)` prints the manifest with
 * `--helmr-manifest`, or connects to the control plane and serves one
 * Session (internal/sessionproc/sessionproc.go, docs/protocol.md).
 */
import * as fs from "node:fs"
import type { ActorSession, ActorTurn, AgentContext, AgentDefinition, InitContext } from "./agent.js"
import { isAgentDefinition } from "./agent.js"
import { encodeJSON, limits, parseInputContent, byteLength } from "./content.js"
import { HelmrError, codeOf } from "./errors.js"
import { buildManifest } from "./manifest.js"
import { McpRuntime } from "./mcp.js"
import { Connection, dial, manifestFlag } from "./protocol.js"
import type { Msg, Welcome } from "./protocol.js"
import { parseDuration } from "./duration.js"
import { installLoopbackDispatcher } from "./dispatcher.js"
import { validate } from "./schema.js"
import { TurnRuntime, causes, cleanupPeriodMs, currentTurn } from "./turn.js"
import type { SessionInfo, Turn } from "./turn.js"

/** Exit statuses of a session process (as the Go SDK's helmr.Main). */
export const exitCodes = { ok: 0, error: 1, notStarted: 2, unusable: 3 } as const

/** The Turn running in this process, for code outside its async context (an Actor's loop). */
let activeTurn: TurnRuntime | undefined

/** The running Turn of the caller, or a HelmrError outside a Turn. */
export function requireTurn(what: string): TurnRuntime {
  const t = currentTurn.getStore() ?? activeTurn
  if (!t || t.closed) throw new HelmrError("invalid_request", `${what} needs a running turn: call it from a turn handler (or an Actor's received Turn)`)
  return t
}

/** Reads the session credential: from the fd in HELMR_SESSION_TOKEN_FD, else HELMR_SESSION_TOKEN; removes both from the environment. */
export function takeSessionToken(env: NodeJS.ProcessEnv = process.env): string {
  const fdVar = env.HELMR_SESSION_TOKEN_FD
  let token = env.HELMR_SESSION_TOKEN ?? ""
  delete env.HELMR_SESSION_TOKEN_FD
  delete env.HELMR_SESSION_TOKEN
  if (fdVar !== undefined && fdVar !== "") {
    const fd = Number(fdVar)
    if (!Number.isInteger(fd) || fd < 0) throw new Error(`HELMR_SESSION_TOKEN_FD=${JSON.stringify(fdVar)} is not a file descriptor number`)
    token = fs.readFileSync(fd, "utf8").trim()
    fs.closeSync(fd)
  }
  return token.trim()
}

/** The credential taken by the bundle's prelude, before agent modules ran. */
let early: { token: string } | { error: unknown } | undefined

/** Takes the session credential now (the prelude's call); serveFromEnv uses it later. Not when printing the manifest. */
export function takeSessionTokenEarly(): void {
  if (early || process.argv[2] === manifestFlag) return
  try {
    early = { token: takeSessionToken() }
  } catch (error) {
    early = { error }
  }
}

/**
 * The entry of a bundle: prints the manifest with `--helmr-manifest`, else
 * serves the Session named by the environment and exits the process with
 * the status of the Go SDK (0 orderly, 1 error, 2 not started by helmr, 3 unusable).
 */
export async function run(definitions: readonly AgentDefinition[]): Promise<never> {
  let code: number = exitCodes.error
  try {
    const defs = definitions.filter(isAgentDefinition)
    const manifest = buildManifest(defs)
    if (process.argv[2] === manifestFlag) {
      await new Promise<void>((r) => process.stdout.write(JSON.stringify(manifest, null, 2) + "\n", () => r()))
      process.exit(0)
    }
    if (!process.env.HELMR_SESSION_SOCKET) {
      process.stderr.write("This is a Helmr agent program. Run it with: helmr dev <package dir>\n")
      process.exit(exitCodes.notStarted)
    }
    code = await serveFromEnv(defs)
  } catch (e) {
    process.stderr.write(`helmr: ${(e as Error)?.stack ?? e}\n`)
    code = exitCodes.error
  }
  process.exit(code)
}

/** Connects with the variables the supervisor sets and serves until shutdown; resolves with the exit status. */
export async function serveFromEnv(defs: readonly AgentDefinition[]): Promise<number> {
  const socket = process.env.HELMR_SESSION_SOCKET ?? ""
  const taken = early
  early = undefined
  if (taken && "error" in taken) throw taken.error
  const token = taken ? taken.token : takeSessionToken()
  const agentId = process.env.HELMR_AGENT ?? ""
  if (!socket || !token) throw new Error("not started by helmr: HELMR_SESSION_SOCKET and a session token (HELMR_SESSION_TOKEN_FD or HELMR_SESSION_TOKEN) are needed")
  let windowMs = 10 * 60_000
  if (process.env.HELMR_RECONNECT_WINDOW) {
    try { windowMs = parseDuration(process.env.HELMR_RECONNECT_WINDOW) } catch { /* keep the default */ }
  }
  installLoopbackDispatcher()
  const ws = await dial(socket, token)
  const conn = new Connection(ws, () => dial(socket, token), windowMs)
  return serve(conn, agentId, defs)
}

/** Runs the protocol on a connection for the named Agent (the welcome's when empty). */
export async function serve(conn: Connection, agentId: string, defs: readonly AgentDefinition[]): Promise<number> {
  const proc = new AbortController()
  // A stopping process ignores park (docs/protocol.md, "Parking").
  proc.signal.addEventListener("abort", () => { conn.stopping = true })
  const shutdown = () => { if (!proc.signal.aborted) proc.abort(causes.shutdown()) }
  const onSignal = () => shutdown()
  process.on("SIGTERM", onSignal)
  process.on("SIGINT", onSignal)
  try {
    return await serveInner(conn, agentId, defs, proc, shutdown)
  } finally {
    process.off("SIGTERM", onSignal)
    process.off("SIGINT", onSignal)
  }
}

async function serveInner(conn: Connection, agentId: string, defs: readonly AgentDefinition[], proc: AbortController, shutdown: () => void): Promise<number> {
  const welcome = await conn.handshake()
  const id = agentId || welcome.agent
  const def = defs.find((d) => d.id === id)
  if (!def) {
    conn.write({ type: "init.failed", error: { code: "not_found", message: `this bundle has no agent ${JSON.stringify(id)}` } })
    await conn.close()
    return exitCodes.error
  }
  const info: SessionInfo = { conn, waiters: new Map() }
  if (def.idleTimeout) info.idleTimeout = def.idleTimeout
  let current: TurnRuntime | undefined
  let ready = false
  const mcp = new McpRuntime({
    resolveScope: (policy) => conn.call(policy === undefined ? { type: "mcp.scope", mcp: {} } : { type: "mcp.scope", mcp: { scope: policy } }),
    call: (scope, tool, args) => {
      const m: Msg = { type: "mcp.call", mcp: { scope, tool, args } }
      if (current && !current.closed) m.turn_id = current.id
      return conn.call(m)
    },
  })
  conn.resumeState = () => ({
    ready,
    ...(current && !settledAck.has(current.id) ? { turnId: current.id } : {}),
    waits: [...info.waiters.entries()].map(([waitId, w]) => ({ turnId: w.turnId, waitId })),
  })
  const settledAck = new Set<string>()

  // Events for the main loop.
  const starts: TurnRuntime[] = []
  let wake: (() => void) | undefined
  const poke = () => { const w = wake; wake = undefined; w?.() }
  let lost = false
  conn.onLost(() => { lost = true; poke() })
  proc.signal.addEventListener("abort", poke)

  conn.onServer = (m: Msg) => {
    switch (m.type) {
      case "message":
        if (current && m.turn_id === current.id && m.message) current.enqueueMessage(m.message)
        break
      case "cancel":
        if (current && m.turn_id === current.id) current.cancel(m.reason === "deadline" ? causes.deadline() : causes.interrupted())
        break
      case "shutdown":
        shutdown()
        break
      case "wait.resolved": {
        const w = m.wait_id ? info.waiters.get(m.wait_id) : undefined
        if (w && m.outcome) { info.waiters.delete(m.wait_id!); w.resolve(m.outcome) }
        break
      }
      case "turn.start":
        if (m.turn) {
          // Current from now, so a cancel or message right behind it finds it.
          current = new TurnRuntime(m.turn, info)
          starts.push(current)
          poke()
        }
        break
    }
  }

  const initCtx = makeInitContext(welcome, proc.signal, mcp)
  let initResult: unknown
  let actorLoop: ActorLoop | undefined
  try {
    if (def.init) initResult = await def.init(initCtx)
    if (def.actor) actorLoop = new ActorLoop(def, { ...initCtx, initResult }, proc.signal)
  } catch (e) {
    if (proc.signal.aborted) {
      // init was ended by a shutdown: a stop, not a failure; queued Turns stay queued.
      conn.write({ type: "stopping" })
      await conn.close()
      mcp.close()
      return exitCodes.ok
    }
    const body = e instanceof HelmrError ? e.toBody() : { code: "handler_failed", message: (e as Error)?.message ?? String(e) }
    conn.write({ type: "init.failed", error: body })
    await conn.close()
    mcp.close()
    process.stderr.write(`helmr: init: ${(e as Error)?.stack ?? e}\n`)
    return exitCodes.error
  }
  ready = true
  conn.write({ type: "ready" })
  const ctx: AgentContext<unknown> = Object.freeze({ ...initCtx, initResult })

  let running: Promise<void> | undefined
  let unusable = false
  try {
    for (;;) {
      if (unusable) return proc.signal.aborted ? exitCodes.ok : exitCodes.unusable
      if (proc.signal.aborted && !lost) {
        // Shutdown: start nothing more here, cancel the running Turn, let it settle, then close.
        conn.write({ type: "stopping" })
        current?.cancel(causes.shutdown())
        await running
        await conn.close()
        return exitCodes.ok
      }
      if (lost) {
        current?.cancel(causes.shutdown())
        await running
        if (proc.signal.aborted) return exitCodes.ok
        process.stderr.write("helmr: connection to the control plane lost\n")
        return exitCodes.error
      }
      const t = running ? undefined : starts.shift()
      if (t) {
        running = (async () => {
          const exit = await runTurn(t, def, ctx, actorLoop)
          settledAck.add(t.id)
          if (current === t) current = undefined
          if (exit) unusable = true
          running = undefined
          poke()
        })()
        continue
      }
      await new Promise<void>((r) => { wake = r })
    }
  } finally {
    actorLoop?.stop()
    mcp.close()
  }
}

function makeInitContext(w: Welcome, signal: AbortSignal, mcp: McpRuntime): InitContext {
  const session: { id: string; key?: string; parent?: { id: string } } = { id: w.session_id }
  if (w.session_key) session.key = w.session_key
  if (w.parent_session_id) session.parent = Object.freeze({ id: w.parent_session_id })
  const recovery: { kind: "initial" | "reconstructed"; reason?: string } = { kind: w.recovery?.kind === "reconstructed" ? "reconstructed" : "initial" }
  if (w.recovery?.reason) recovery.reason = w.recovery.reason
  return Object.freeze({
    mcp: Object.freeze({ getConnectionOptions: (policy?: Parameters<McpRuntime["getConnectionOptions"]>[0]) => mcp.getConnectionOptions(policy) }),
    session: Object.freeze(session),
    computer: Object.freeze({ id: w.computer_id }),
    deployment: Object.freeze({ id: w.deployment_id }),
    recovery: Object.freeze(recovery),
    signal,
  })
}

/** Validates a Turn's input: text Content without inputSchema, else the schema's output. */
async function turnInput(def: AgentDefinition, raw: unknown): Promise<unknown> {
  if (!def.inputSchema) {
    const n = byteLength(JSON.stringify(raw ?? null))
    if (n > limits.maxInputBytes) throw new HelmrError("input_invalid", `content is ${n} bytes of JSON; the limit is ${limits.maxInputBytes}`)
    return parseInputContent(raw)
  }
  return validate(def.inputSchema, raw, "input_invalid", "the input")
}

/** Validates and encodes a handler's result: resultSchema, finite JSON, at most 1 MiB. */
async function encodeResult(def: AgentDefinition, value: unknown): Promise<unknown> {
  let v = value
  if (def.resultSchema) v = await validate(def.resultSchema, v, "result_invalid", "the result")
  if (v === undefined) return null
  const s = encodeJSON(v, "the result", "result_invalid")
  if (byteLength(s) > limits.maxResultBytes) throw new HelmrError("result_invalid", `the result is ${byteLength(s)} bytes of JSON; the limit is ${limits.maxResultBytes}`)
  return JSON.parse(s)
}

type HandlerOutcome = { ok: true; result: unknown } | { ok: false; err: unknown }

/**
 * Runs one Turn: the handler, then on cancellation or failure the callbacks
 * alongside drainage within the cleanup period, then the one settle.
 * Resolves true when the process must exit (cleanup failed or overran).
 */
async function runTurn(t: TurnRuntime, def: AgentDefinition, ctx: AgentContext<unknown>, actorLoop: ActorLoop | undefined): Promise<boolean> {
  activeTurn = t
  const handler: Promise<HandlerOutcome> = currentTurn.run(t, async () => {
    try {
      const input = await turnInput(def, t.start.input)
      const turn = t.handle(input)
      const value = actorLoop ? await actorLoop.deliver(turn) : await def.turn!(turn, ctx)
      return { ok: true as const, result: await encodeResult(def, value) }
    } catch (err) {
      return { ok: false as const, err }
    }
  })
  let aborted: () => void = () => {}
  const abortP = new Promise<"aborted">((r) => {
    if (t.signal.aborted) r("aborted")
    aborted = () => r("aborted")
    t.signal.addEventListener("abort", aborted, { once: true })
  })
  const first = await Promise.race([handler, abortP])
  t.signal.removeEventListener("abort", aborted)
  try {
    if (first !== "aborted" && !t.signal.aborted) {
      if (first.ok) {
        // Success: cancellation callbacks do not run.
        t.close()
        await settle(t, "completed", first.result, undefined)
        return false
      }
      if (codeOf(first.err) === "result_invalid") {
        // The handler completed; only its result was refused. Nothing is cancelled.
        t.close()
        await settle(t, "failed", undefined, first.err)
        return false
      }
    }
    // Cancellation or failure: callbacks run alongside drainage, joined within the cleanup period.
    let cause: unknown = t.signal.aborted ? t.signal.reason : (first as { err: unknown }).err
    t.cancel(cause)
    cause = t.signal.reason
    t.startCancellation(cause)
    let timer: NodeJS.Timeout | undefined
    const period = new Promise<"overran">((r) => { timer = setTimeout(() => r("overran"), cleanupPeriodMs) })
    let overran = false
    if (first === "aborted") overran = (await Promise.race([handler, period])) === "overran"
    while (!overran && t.running.size > 0) {
      overran = (await Promise.race([Promise.all([...t.running]), period])) === "overran"
    }
    clearTimeout(timer)
    t.close()
    const code = codeOf(cause)
    let status: "failed" | "interrupted" = "failed"
    let err: unknown = cause
    if (code === "interrupted" || code === "deadline_exceeded") status = "interrupted"
    if (t.callbackFailed || overran) {
      const why = overran ? "the handler and callbacks did not drain within the cleanup period" : "a cancellation callback failed"
      const msg = cause instanceof Error ? (cause instanceof HelmrError ? cause.detail : cause.message) : String(cause)
      err = new HelmrError("cleanup_failed", `${why} (${msg})`)
      await settle(t, status, undefined, err)
      return true
    }
    await settle(t, status, undefined, err)
    return false
  } finally {
    if (activeTurn === t) activeTurn = undefined
  }
}

async function settle(t: TurnRuntime, status: "completed" | "failed" | "interrupted", result: unknown, err: unknown): Promise<void> {
  try {
    await t.settle(status, result, err)
  } catch (e) {
    process.stderr.write(`helmr: settle of turn ${t.id}: ${(e as Error).message}\n`)
  } finally {
    t.cancel(new HelmrError("turn_settled", "the turn has settled"))
  }
}

interface Delivery { turn: ActorTurn<unknown, unknown>; done: Promise<{ ok: true; value: unknown } | { ok: false; err: unknown }> }

/** The Actor side: one `run` loop receives the Session's Turns. */
class ActorLoop {
  private readonly incoming: Delivery[] = []
  private wakeReceiver: (() => void) | undefined
  private last: ActorTurn<unknown, unknown> | undefined
  private exited = false
  private exitErr: unknown
  private readonly exitedP: Promise<void>

  constructor(def: AgentDefinition, ctx: AgentContext<unknown>, private readonly stopping: AbortSignal) {
    const session: ActorSession<unknown, unknown> = Object.freeze({ receive: (o?: { signal?: AbortSignal }) => this.receive(o?.signal) })
    stopping.addEventListener("abort", () => this.wake())
    this.exitedP = (async () => {
      try {
        await def.run!(session, ctx)
      } catch (e) {
        this.exitErr = e
      } finally {
        this.exited = true
      }
    })()
  }

  private wake(): void { const w = this.wakeReceiver; this.wakeReceiver = undefined; w?.() }

  stop(): void { this.wake() }

  private async receive(signal?: AbortSignal): Promise<ActorTurn<unknown, unknown> | null> {
    this.last?.complete(undefined)
    this.last = undefined
    for (;;) {
      const d = this.incoming.shift()
      if (d) { this.last = d.turn; return d.turn }
      if (this.stopping.aborted) return null
      if (signal?.aborted) throw signal.reason
      await new Promise<void>((r) => {
        this.wakeReceiver = r
        signal?.addEventListener("abort", () => this.wake(), { once: true })
      })
    }
  }

  /** Hands a Turn to the loop and resolves with the value it completes it with. */
  async deliver(turn: Turn<unknown>): Promise<unknown> {
    if (this.exited) throw this.exitError()
    let finish!: (r: { ok: true; value: unknown } | { ok: false; err: unknown }) => void
    const done = new Promise<{ ok: true; value: unknown } | { ok: false; err: unknown }>((r) => { finish = r })
    let finished = false
    const once = (r: { ok: true; value: unknown } | { ok: false; err: unknown }) => { if (!finished) { finished = true; finish(r) } }
    const at = Object.freeze({
      ...turn,
      complete: (value: unknown) => once({ ok: true, value }),
      fail: (err: unknown) => once({ ok: false, err: err ?? new HelmrError("handler_failed", "the actor failed the turn") }),
    }) as ActorTurn<unknown, unknown>
    this.incoming.push({ turn: at, done })
    this.wake()
    const r = await Promise.race([done, this.exitedP.then(() => "exited" as const)])
    if (r === "exited") {
      if (finished) { const x = await done; if (x.ok) return x.value; throw x.err }
      throw this.exitError()
    }
    if (r.ok) return r.value
    throw r.err
  }

  private exitError(): HelmrError {
    if (this.exitErr !== undefined) return new HelmrError("handler_failed", `the actor's run ended: ${(this.exitErr as Error)?.message ?? this.exitErr}`)
    return new HelmrError("handler_failed", "the actor's run returned; it receives no more turns")
  }
}


/** Collects the exported Agent definitions of modules (each once, in order); the bundle's entry uses it. */
export function collectAgents(modules: ReadonlyArray<Record<string, unknown>>): AgentDefinition[] {
  const out: AgentDefinition[] = []
  const seen = new Set<unknown>()
  for (const m of modules) {
    for (const v of Object.values(m)) {
      if (isAgentDefinition(v) && !seen.has(v)) { seen.add(v); out.push(v) }
    }
  }
  return out
}
export { buildManifest } from "./manifest.js"
