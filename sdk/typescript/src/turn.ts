/**
 * The Turn: what a handler gets (the spec's `Turn` interface) and the
 * runtime behind it (internal/sessionproc/turn.go): ops, output budget,
 * the staged response, messages one at a time, and cancellation callbacks.
 */
import { AsyncLocalStorage } from "node:async_hooks"
import { randomBytes } from "node:crypto"
import { HelmrError, errorBody } from "./errors.js"
import type { Connection, Msg, TurnStart, WaitOutcome } from "./protocol.js"
import { checkContentSize, encodedSize, limits, parseInputContent, toContent, byteLength, encodeJSON } from "./content.js"
import type { HumanContent, InputContent, JsonValue } from "./content.js"
import { uuidv7 } from "./uuid.js"

export type MaybePromise<T> = T | Promise<T>

export interface SlackInputSource { readonly teamId: string; readonly channelId: string; readonly threadTs: string; readonly messageTs: string; readonly userId: string }
/** Where a Turn's input came from. */
export type InputSource =
  | { readonly kind: "user"; readonly slack?: SlackInputSource }
  | { readonly kind: "api_key" }
  | { readonly kind: "schedule" }
  | { readonly kind: "session"; readonly requesterSessionId: string; readonly originTurnId?: string }
export type MessageSource = Exclude<InputSource, { kind: "schedule" }>

/** A message sent to a running Turn. */
export interface Message {
  readonly id: string
  readonly content: InputContent
  readonly source: MessageSource
}

/** The receipt of `output.write`: the Session event sequence of the output record. */
export interface OutputReceipt { readonly sequence: number }

/** A choice option of a question. */
export interface ChoiceOption { readonly id: string; readonly label: string; readonly value: JsonValue; readonly description?: string }
/** A question: a prompt and the kind of answer it takes. */
export type Question =
  | { readonly prompt: HumanContent; readonly answer: { readonly type: "text" } }
  | { readonly prompt: HumanContent; readonly answer: { readonly type: "choice"; readonly options: readonly ChoiceOption[]; readonly multiple?: boolean; readonly allowText?: boolean } }
/** The answer to a choice question: the selected options in declared order, and free text when allowed. */
export interface ChoiceAnswer<O extends ChoiceOption = ChoiceOption> {
  readonly selected: readonly { readonly id: O["id"]; readonly value: O["value"] }[]
  readonly text?: string
}
/** The answer type of a question. */
export type AnswerFor<Q extends Question> = Q["answer"] extends { type: "choice"; options: readonly (infer O extends ChoiceOption)[] } ? ChoiceAnswer<O> : string
/** Who answered. */
export interface Responder { readonly kind: "user" | "api_key"; readonly id?: string }
/** An answer and its responder. */
export interface AskAnswer<A> { readonly answer: A; readonly respondedBy: Responder }

/** One Turn, as the handler sees it. */
export interface Turn<I = InputContent> {
  readonly id: string
  readonly sequence: number
  readonly createdAt: string
  readonly input: I
  readonly source: InputSource
  readonly signal: AbortSignal
  onCancel(handler: (reason: unknown) => MaybePromise<void>): void
  readonly output: {
    write(value: HumanContent): Promise<OutputReceipt>
    pipe(values: AsyncIterable<HumanContent>, options?: { signal?: AbortSignal }): Promise<void>
  }
  respond(value: HumanContent): Promise<void>
  onMessage(handler: (message: Message) => MaybePromise<void>): Promise<void>
  ask<const Q extends Question>(question: Q, options?: { signal?: AbortSignal; idleTimeout?: string }): Promise<AskAnswer<AnswerFor<Q>>>
}

/** Cancellation causes (turn.signal.reason). */
export const causes = {
  interrupted: () => new HelmrError("interrupted", "the turn was interrupted"),
  deadline: () => new HelmrError("deadline_exceeded", "the turn reached its max turn duration"),
  shutdown: () => new HelmrError("interrupted", "the session process is shutting down"),
}

/** The cleanup period of a cancelled Turn. */
export const cleanupPeriodMs = 10_000

const messageRejectedBrand = Symbol.for("helmr.sdk.MessageRejected")

/**
 * Throw from an `onMessage` handler to reject that message before it caused
 * any effect; the Turn goes on. `instanceof` works across copies of the SDK.
 */
export class MessageRejected extends Error {
  constructor(message: string) {
    super(message)
    this.name = "MessageRejected"
    Object.defineProperty(this, messageRejectedBrand, { value: true })
  }
  static [Symbol.hasInstance](v: unknown): boolean {
    return typeof v === "object" && v !== null && (v as Record<symbol, unknown>)[messageRejectedBrand] === true
  }
}

/** The running Turn of the current async context (for timers and tokens). */
export const currentTurn = new AsyncLocalStorage<TurnRuntime>()

/** Converts a wire source (snake_case) to the SDK's InputSource. */
export function toSource(s: Record<string, unknown> | undefined): InputSource {
  const kind = (s?.kind as string) ?? "api_key"
  if (kind === "session") {
    const out: { kind: "session"; requesterSessionId: string; originTurnId?: string } = { kind, requesterSessionId: String(s?.requester_session_id ?? "") }
    if (s?.origin_turn_id) out.originTurnId = String(s.origin_turn_id)
    return Object.freeze(out)
  }
  if (kind === "user" && s?.slack && typeof s.slack === "object") {
    const sl = s.slack as Record<string, string>
    return Object.freeze({ kind, slack: Object.freeze({ teamId: sl.team_id, channelId: sl.channel_id, threadTs: sl.thread_ts, messageTs: sl.message_ts, userId: sl.user_id }) })
  }
  return Object.freeze({ kind } as InputSource)
}

/** What the runtime knows of the Session (shared by Turns). */
export interface SessionInfo {
  conn: Connection
  idleTimeout?: string
  waiters: Map<string, { turnId: string; resolve(o: WaitOutcome): void }>
}

/** The runtime side of one Turn. */
export class TurnRuntime {
  readonly id: string
  readonly start: TurnStart
  readonly controller = new AbortController()
  private ops = 0
  private outputUsed = 0
  response: unknown[] | undefined
  closed = false
  private cancelled = false
  private callbacks: Array<(reason: unknown) => MaybePromise<void>> = []
  readonly running = new Set<Promise<void>>()
  callbackFailed = false
  private deadlineTimer: NodeJS.Timeout | undefined
  private msgHandler: ((m: Message) => MaybePromise<void>) | undefined
  private readonly msgQueue: Message[] = []
  private readonly msgSeen = new Set<string>()
  private pumping = false
  private readonly startedAt = new Date()

  constructor(start: TurnStart, readonly info: SessionInfo) {
    this.id = start.id
    this.start = start
    if (start.deadline) {
      const ms = Date.parse(start.deadline) - Date.now()
      this.deadlineTimer = setTimeout(() => this.cancel(causes.deadline()), Math.max(0, ms))
      this.deadlineTimer.unref()
    }
  }

  get signal(): AbortSignal { return this.controller.signal }

  /** Ends the Turn's signal with cause (first cause wins). */
  cancel(cause: unknown): void {
    if (!this.controller.signal.aborted) this.controller.abort(cause)
  }

  /**
   * Numbers an op and writes it at once (ops reach the server in op order),
   * then waits for its ack. With the signal already aborted (cleanup work),
   * the wait is bounded to 5 s; an abort during the wait ends it with the cause.
   */
  async op(m: Msg, opts: { untilAck?: boolean } = {}): Promise<Msg> {
    m.turn_id = this.id
    m.op = ++this.ops
    const ack = this.info.conn.sendOp(m)
    ack.catch(() => {})
    let a: Msg
    if (opts.untilAck) a = await ack
    else if (this.signal.aborted) {
      let t: NodeJS.Timeout | undefined
      a = await Promise.race([ack, new Promise<never>((_, rej) => { t = setTimeout(() => rej(this.signal.reason), 5000) })]).finally(() => clearTimeout(t))
    } else {
      let onAbort: () => void = () => {}
      a = await Promise.race([ack, new Promise<never>((_, rej) => { onAbort = () => rej(this.signal.reason); this.signal.addEventListener("abort", onAbort, { once: true }) })])
        .finally(() => this.signal.removeEventListener("abort", onAbort))
    }
    if (a.error) throw HelmrError.from(a.error)
    return a
  }

  async output(v: HumanContent): Promise<OutputReceipt> {
    const c = toContent(v, "output")
    checkContentSize(c, "output")
    const size = encodedSize(c)
    if (this.outputUsed + size > limits.maxTurnOutputBytes) {
      throw new HelmrError("limit_exceeded", `output: the turn's output budget of ${limits.maxTurnOutputBytes} bytes would be exceeded`, { used: this.outputUsed, size })
    }
    this.outputUsed += size
    try {
      const a = await this.op({ type: "output", content: c as unknown[] })
      return { sequence: a.sequence ?? 0 }
    } catch (e) {
      this.outputUsed -= size
      throw e
    }
  }

  respond(v: HumanContent): void {
    const c = toContent(v, "response")
    checkContentSize(c, "response", limits.maxResponseBytes)
    if (this.closed) throw new HelmrError("turn_settled", "the turn's handler has returned; no response is admitted")
    if (this.response !== undefined) throw new HelmrError("response_already_staged", `turn ${this.id} already has a staged response`)
    this.response = c as unknown[]
  }

  onCancel(fn: (reason: unknown) => MaybePromise<void>): void {
    if (typeof fn !== "function") throw new TypeError("onCancel: handler must be a function")
    if (this.closed) throw new HelmrError("turn_settled", "the turn has settled; onCancel is closed")
    if (this.cancelled) this.runCallback(fn, this.signal.reason)
    else this.callbacks.push(fn)
  }

  private runCallback(fn: (reason: unknown) => MaybePromise<void>, reason: unknown): void {
    const p = (async () => { await fn(reason) })().catch(() => { this.callbackFailed = true })
    const tracked: Promise<void> = p.finally(() => this.running.delete(tracked))
    this.running.add(tracked)
  }

  /** Starts every registered cancellation callback once. */
  startCancellation(reason: unknown): void {
    if (this.cancelled) return
    this.cancelled = true
    for (const fn of this.callbacks.splice(0)) this.runCallback(fn, reason)
  }

  /** Ends drainage: no more callbacks, responses or messages. */
  close(): void {
    this.closed = true
    if (this.deadlineTimer) clearTimeout(this.deadlineTimer)
  }

  onMessage(fn: (m: Message) => MaybePromise<void>): void {
    if (typeof fn !== "function") throw new TypeError("onMessage: handler must be a function")
    if (this.msgHandler) throw new HelmrError("conflict", "the turn already has a message handler")
    if (this.closed) throw new HelmrError("turn_settled", "the turn has settled")
    this.msgHandler = fn
    void this.pump()
  }

  enqueueMessage(m: { id: string; content: unknown[]; source: Record<string, unknown> }): void {
    if (this.msgSeen.has(m.id)) return
    this.msgSeen.add(m.id)
    let content: InputContent
    try {
      content = parseInputContent(m.content ?? [])
    } catch {
      content = []
    }
    this.msgQueue.push(Object.freeze({ id: m.id, content, source: toSource(m.source) as MessageSource }))
    void this.pump()
  }

  private async pump(): Promise<void> {
    if (this.pumping || !this.msgHandler) return
    this.pumping = true
    try {
      while (this.msgQueue.length && !this.closed && !this.signal.aborted) {
        const m = this.msgQueue.shift()!
        let err: unknown
        let failed = false
        try {
          await this.msgHandler(m)
        } catch (e) {
          failed = true
          err = e
        }
        if (!failed) {
          await this.op({ type: "message.accept", message_id: m.id }).catch(() => {})
        } else if (err instanceof MessageRejected) {
          await this.op({ type: "message.reject", message_id: m.id, reason: "message_rejected", error: { code: "message_rejected", message: (err as Error).message } }).catch(() => {})
        } else {
          const msg = err instanceof Error ? err.message : String(err)
          await this.op({ type: "message.reject", message_id: m.id, reason: "callback_failed", error: { code: "callback_failed", message: msg } }).catch(() => {})
          this.cancel(new HelmrError("callback_failed", "a message handler failed: " + msg))
          return
        }
      }
    } finally {
      this.pumping = false
    }
  }

  /** Starts a durable wait and resolves with its outcome; an abort withdraws it. */
  async wait(w: Record<string, unknown>, signal?: AbortSignal): Promise<WaitOutcome> {
    const id = (w.id as string) || uuidv7()
    const wait: Record<string, unknown> = { ...w, id }
    if (!wait.idle_timeout && this.info.idleTimeout) wait.idle_timeout = this.info.idleTimeout
    const signals = [this.signal, ...(signal ? [signal] : [])]
    const aborted = () => signals.find((s) => s.aborted)
    if (aborted()) throw aborted()!.reason
    let resolveOutcome!: (o: WaitOutcome) => void
    const outcome = new Promise<WaitOutcome>((r) => { resolveOutcome = r })
    this.info.waiters.set(id, { turnId: this.id, resolve: resolveOutcome })
    const cleanup: Array<() => void> = []
    try {
      await this.op({ type: "wait.start", wait })
      const ended = new Promise<never>((_, reject) => {
        // A cancel may have come in the same read as the ack: it already fired.
        const already = aborted()
        if (already) return reject(already.reason)
        for (const s of signals) {
          const f = () => reject(s.reason)
          s.addEventListener("abort", f, { once: true })
          cleanup.push(() => s.removeEventListener("abort", f))
        }
        this.info.conn.onLost(() => reject(new HelmrError("unavailable", "connection to the control plane lost")))
      })
      try {
        return await Promise.race([outcome, ended])
      } catch (e) {
        if (aborted()) {
          // Withdraw the wait so the server does not keep it open.
          await this.op({ type: "wait.cancel", wait_id: id }).catch(() => {})
        }
        throw e
      }
    } finally {
      for (const f of cleanup) f()
      this.info.waiters.delete(id)
    }
  }

  async ask(q: Question, options: { signal?: AbortSignal; idleTimeout?: string } = {}): Promise<AskAnswer<unknown>> {
    const question = checkQuestion(q)
    if (this.closed) throw new HelmrError("turn_settled", "the turn's handler has returned; no question is admitted")
    const id = uuidv7()
    await this.op({ type: "ask", ask: { id, question } })
    const w: Record<string, unknown> = { kind: "ask", target_id: id }
    if (options.idleTimeout) w.idle_timeout = options.idleTimeout
    const o = await this.wait(w, options.signal)
    if (o.status !== "resolved") throw HelmrError.from(o.error, "internal")
    const rb = o.responded_by ?? { kind: "api_key" }
    const respondedBy: Responder = rb.id ? { kind: rb.kind as Responder["kind"], id: rb.id } : { kind: rb.kind as Responder["kind"] }
    return Object.freeze({ answer: deepFreeze(o.value), respondedBy: Object.freeze(respondedBy) })
  }

  /** Builds the handler's Turn object. */
  handle<I>(input: I): Turn<I> {
    const rt = this
    const output = Object.freeze({
      write: (v: HumanContent) => rt.output(v),
      async pipe(values: AsyncIterable<HumanContent>, options: { signal?: AbortSignal } = {}): Promise<void> {
        if (values == null || typeof (values as AsyncIterable<HumanContent>)[Symbol.asyncIterator] !== "function" && typeof (values as unknown as Iterable<HumanContent>)[Symbol.iterator] !== "function") {
          throw new TypeError("output.pipe: values must be an async iterable")
        }
        const signals = options.signal ? [options.signal, rt.signal] : [rt.signal]
        const aborted = () => signals.find((s) => s.aborted)
        const it: AsyncIterator<HumanContent> | Iterator<HumanContent> = typeof (values as AsyncIterable<HumanContent>)[Symbol.asyncIterator] === "function"
          ? (values as AsyncIterable<HumanContent>)[Symbol.asyncIterator]()
          : (values as unknown as Iterable<HumanContent>)[Symbol.iterator]()
        // An abort ends the pipe also while the iterable waits for its next item (and closes it).
        const close = () => { try { void Promise.resolve(it.return?.()).catch(() => {}) } catch { /* closing is best effort */ } }
        for (;;) {
          const a = aborted()
          if (a) { close(); throw a.reason }
          let onAbort: () => void = () => {}
          const ended = new Promise<never>((_, reject) => {
            onAbort = () => reject(aborted()!.reason)
            for (const s of signals) s.addEventListener("abort", onAbort, { once: true })
          })
          let r: IteratorResult<HumanContent>
          try {
            r = await Promise.race([Promise.resolve(it.next()), ended])
          } catch (e) {
            if (aborted()) close()
            throw e
          } finally {
            for (const s of signals) s.removeEventListener("abort", onAbort)
          }
          if (r.done) return
          const v = await r.value
          const b = aborted()
          if (b) { close(); throw b.reason }
          try {
            await rt.output(v)
          } catch (e) {
            close()
            throw e
          }
        }
      },
    })
    return Object.freeze({
      id: rt.start.id,
      sequence: rt.start.sequence,
      createdAt: rt.start.created_at,
      input,
      source: toSource(rt.start.source),
      signal: rt.signal,
      output,
      onCancel: (fn: (reason: unknown) => MaybePromise<void>) => rt.onCancel(fn),
      respond: async (v: HumanContent) => rt.respond(v),
      onMessage: async (fn: (m: Message) => MaybePromise<void>) => rt.onMessage(fn),
      ask: ((q: Question, o?: { signal?: AbortSignal; idleTimeout?: string }) => rt.ask(q, o)) as Turn<I>["ask"],
    })
  }

  /** Sends the one turn.settle of this Turn and waits for its ack. */
  async settle(status: "completed" | "failed" | "interrupted", result: unknown, err: unknown): Promise<Msg> {
    const m: Msg = { type: "turn.settle", status }
    if (status === "completed") {
      m.result = result === undefined ? null : result
      if (this.response !== undefined) m.response = this.response
    } else {
      m.error = errorBody(err, "handler_failed")
    }
    if (this.start.traceparent) {
      // A traced Turn: its handler's span, shipped before the settle (the
      // control plane exports it in the Turn's trace).
      this.info.conn.write({ type: "spans", turn_id: this.id, spans: [{
        span_id: randomBytes(8).toString("hex"), name: "helmr.turn.handler",
        start: this.startedAt.toISOString(), end: new Date().toISOString(),
        attributes: { "helmr.turn.status": status },
        ...(m.error ? { error: m.error.code } : {}),
      }] })
    }
    return this.op(m, { untilAck: true })
  }
}

function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null && !Object.isFrozen(v)) {
    Object.freeze(v)
    for (const x of Object.values(v)) deepFreeze(x)
  }
  return v
}

/** Checks a question as helmrtype/ask.go does and returns its wire form. */
export function checkQuestion(q: Question): Record<string, unknown> {
  const bad = (code: string, m: string): never => { throw new HelmrError(code, m) }
  if (typeof q !== "object" || q === null) bad("invalid_request", "ask: the question must be an object {prompt, answer}")
  let prompt
  try {
    prompt = toContent(q.prompt, "prompt")
  } catch (e) {
    throw new HelmrError((e as HelmrError).code === "limit_exceeded" ? "limit_exceeded" : "invalid_request", (e as HelmrError).detail)
  }
  if (prompt.length === 0) bad("invalid_request", "prompt must have at least one part")
  const a = q.answer as Record<string, unknown> | undefined
  if (typeof a !== "object" || a === null) bad("invalid_request", "answer is required: {type: \"text\"} or {type: \"choice\", options}")
  const answer: Record<string, unknown> = { type: a!.type }
  if (a!.type === "text") {
    if (a!.options !== undefined) bad("invalid_request", "answer.options is only for choice questions")
    if (a!.multiple) bad("invalid_request", "answer.multiple is only for choice questions")
    if (a!.allowText) bad("invalid_request", "answer.allowText is only for choice questions")
  } else if (a!.type === "choice") {
    const opts = a!.options
    if (!Array.isArray(opts) || opts.length === 0) bad("invalid_request", "answer.options must have at least one option")
    if ((opts as unknown[]).length > 100) bad("limit_exceeded", `answer.options has ${(opts as unknown[]).length} options; the limit is 100`)
    const ids = new Set<string>()
    answer.options = (opts as ChoiceOption[]).map((o, i) => {
      const name = `answer.options[${i}]`
      if (typeof o !== "object" || o === null) bad("invalid_request", `${name} must be an object {id, label, value}`)
      if (typeof o.id !== "string" || o.id === "") bad("invalid_request", `${name}.id must not be empty`)
      if (byteLength(o.id) > 128) bad("limit_exceeded", `${name}.id is ${byteLength(o.id)} bytes; the limit is 128`)
      if (typeof o.label !== "string" || o.label === "") bad("invalid_request", `${name}.label must not be empty`)
      if (byteLength(o.label) > 256) bad("limit_exceeded", `${name}.label is ${byteLength(o.label)} bytes; the limit is 256`)
      if (o.description !== undefined && (typeof o.description !== "string" || byteLength(o.description) > 2048)) bad("limit_exceeded", `${name}.description must be a string of at most 2048 bytes`)
      if (o.value === undefined) bad("invalid_request", `${name}.value is required: the JSON value an answer carries when the option is selected (null is allowed)`)
      if (ids.has(o.id)) bad("invalid_request", `${name}.id ${JSON.stringify(o.id)} is used twice`)
      ids.add(o.id)
      encodeJSON(o.value, `${name}.value`, "invalid_request")
      const w: Record<string, unknown> = { id: o.id, label: o.label, value: o.value }
      if (o.description) w.description = o.description
      return w
    })
    if (a!.multiple) answer.multiple = true
    if (a!.allowText) answer.allow_text = true
  } else {
    bad("invalid_request", `answer.type must be "text" or "choice", not ${JSON.stringify(a!.type)}`)
  }
  const wire = { prompt, answer }
  const n = byteLength(JSON.stringify(wire))
  if (n > 256 << 10) bad("limit_exceeded", `the question is ${n} bytes of JSON; the limit is ${256 << 10}`)
  return wire
}

