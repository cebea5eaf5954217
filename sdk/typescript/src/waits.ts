/** Durable waits: `timers` and `tokens` (Go: timers/, tokens/). They work inside a running Turn. */
import { randomBytes } from "node:crypto"
import type { StandardSchemaV1 } from "@standard-schema/spec"
import { encodeJSON } from "./content.js"
import type { JsonValue } from "./content.js"
import { parseDuration } from "./duration.js"
import type { Duration } from "./duration.js"
import { HelmrError } from "./errors.js"
import { requireTurn } from "./runtime.js"
import { jsonSchemaOf, validate } from "./schema.js"
import { uuidv7 } from "./uuid.js"

/** Options of a wait. */
export interface WaitOptions {
  /** How long the wait keeps the process hot before it may be suspended (1ms–1h). */
  readonly idleTimeout?: Duration
  /** Withdraws the wait when aborted (the Turn's signal always does). */
  readonly signal?: AbortSignal
}

function checkIdle(o: WaitOptions | undefined): void {
  if (o?.idleTimeout === undefined) return
  const ms = parseDuration(o.idleTimeout)
  if (ms < 1 || ms > 3_600_000) throw new HelmrError("invalid_request", `idle_timeout ${o.idleTimeout} is out of range: it must be from 1ms to 1h`)
}

async function timerUntil(until: Date, o?: WaitOptions): Promise<void> {
  const t = requireTurn("timers")
  checkIdle(o)
  if (Number.isNaN(until.getTime())) throw new TypeError("timers: not a valid date")
  const w: Record<string, unknown> = { kind: "timer", until: until.toISOString() }
  if (o?.idleTimeout) w.idle_timeout = o.idleTimeout
  const out = await t.wait(w, o?.signal)
  if (out.status !== "resolved") throw HelmrError.from(out.error)
}

/** Timers park a Turn on time only, durably: they resolve after a control-plane restart too. */
export const timers = Object.freeze({
  /** Waits for a Duration (`"15m"`) or a number of milliseconds. */
  async waitFor(duration: Duration | number, options?: WaitOptions): Promise<void> {
    const ms = typeof duration === "number" ? duration : parseDuration(duration)
    if (!Number.isFinite(ms) || ms < 0) throw new TypeError("timers.waitFor: the duration must be a non-negative number of ms or a Duration")
    return timerUntil(new Date(Date.now() + ms), options)
  },
  /** Waits until a time. */
  waitUntil(date: Date | string | number, options?: WaitOptions): Promise<void> {
    return timerUntil(date instanceof Date ? date : new Date(date), options)
  },
})

/** How a Token wait ended other than with a completion. */
export type TokenWaitError = HelmrError & { readonly code: "wait_timeout" | "token_cancelled" | "token_expired" }

/** The result of `token.wait()`: check `ok`, or `unwrap()` to get the value or throw the typed error. */
export type TokenWaitResult<T> =
  | { readonly ok: true; readonly output: T; unwrap(): T }
  | { readonly ok: false; readonly error: TokenWaitError; unwrap(): never }

export interface TokenWaitOptions<S extends StandardSchemaV1 | undefined> extends WaitOptions {
  /** This waiter's timeout (the Token's own expiry may be earlier). */
  readonly timeout?: Duration
  /**
   * Validates (and may transform) the completion data; a failure throws result_invalid.
   * When the validator has a JSON Schema form, the Token carries it from this wait on:
   * the control plane refuses other completions (400 input_invalid) and the Token stays pending.
   */
  readonly schema?: S
}

/** A Token: one pending value an outside system completes. */
export interface Token {
  readonly id: string
  /** Where an outside system POSTs the completion (`{"data": …}`). */
  readonly callbackUrl: string
  /** The Token's public credential (`Authorization: Bearer …` on callbackUrl); only at creation. */
  readonly publicAccessToken: string
  readonly expiresAt?: string
  wait<S extends StandardSchemaV1 | undefined = undefined>(options?: TokenWaitOptions<S>): Promise<TokenWaitResult<S extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<S> : JsonValue>>
}

export interface TokenCreateOptions {
  /** The Token expires after this long (at most 365d). */
  readonly timeout?: Duration
  readonly tags?: readonly string[]
  readonly metadata?: Readonly<Record<string, JsonValue>>
  /** Returns the Token created with this key before, instead of a new one. */
  readonly idempotencyKey?: string
}

function tokenHandle(id: string, callbackUrl: string, publicAccessToken: string, expiresAt?: string): Token {
  const t: Record<string, unknown> = {
    id, callbackUrl, publicAccessToken,
    async wait(o: TokenWaitOptions<StandardSchemaV1 | undefined> = {}) {
      const rt = requireTurn("token.wait")
      checkIdle(o)
      const w: Record<string, unknown> = { kind: "token", target_id: id }
      if (o.timeout) { parseDuration(o.timeout); w.timeout = o.timeout }
      if (o.idleTimeout) w.idle_timeout = o.idleTimeout
      if (o.schema) {
        const js = jsonSchemaOf(o.schema, "input")
        if (!("unavailable" in js)) w.schema = js
      }
      const out = await rt.wait(w, o.signal)
      if (out.status !== "resolved") {
        const error = HelmrError.from(out.error)
        if (error.code === "wait_timeout" || error.code === "token_cancelled" || error.code === "token_expired") {
          return Object.freeze({ ok: false, error, unwrap(): never { throw error } })
        }
        throw error
      }
      let value: unknown = out.value === undefined ? null : out.value
      if (o.schema) value = await validate(o.schema, value, "result_invalid", `token ${id}: the completion`)
      return Object.freeze({ ok: true, output: value, unwrap: () => value })
    },
  }
  if (expiresAt) t.expiresAt = expiresAt
  return Object.freeze(t) as unknown as Token
}

/** Tokens: create one in a Turn, hand out its callback, wait for its completion. */
export const tokens = Object.freeze({
  /** Creates a Token with its callback URL and public credential. */
  async create(options: TokenCreateOptions = {}): Promise<Token> {
    const rt = requireTurn("tokens.create")
    const create: Record<string, unknown> = {}
    if (options.timeout !== undefined) {
      if (parseDuration(options.timeout) > 365 * 86_400_000) throw new HelmrError("invalid_request", `timeout ${JSON.stringify(options.timeout)} is longer than the limit of 365d`)
      create.timeout = options.timeout
    }
    if (options.tags !== undefined) {
      if (!Array.isArray(options.tags) || options.tags.length > 20) throw new HelmrError("limit_exceeded", "tags: at most 20 tags")
      options.tags.forEach((tag, i) => { if (typeof tag !== "string" || tag === "" || Buffer.byteLength(tag) > 128) throw new HelmrError("invalid_request", `tags[${i}] must be a non-empty string of at most 128 bytes`) })
      create.tags = [...options.tags]
    }
    if (options.metadata !== undefined) {
      if (typeof options.metadata !== "object" || options.metadata === null || Array.isArray(options.metadata)) throw new HelmrError("invalid_request", "metadata must be a JSON object")
      const s = encodeJSON(options.metadata, "metadata", "invalid_request")
      if (Buffer.byteLength(s) > 64 << 10) throw new HelmrError("limit_exceeded", `metadata is ${Buffer.byteLength(s)} bytes of JSON; the limit is ${64 << 10}`)
      create.metadata = options.metadata
    }
    if (options.idempotencyKey !== undefined) create.idempotency_key = options.idempotencyKey
    const secret = "hlmr_tok_" + randomBytes(32).toString("hex")
    const id = uuidv7()
    const a = await rt.op({ type: "token.create", token: { id, secret, create } })
    const st = a.token_state as Record<string, string> | undefined
    if (!st) throw new HelmrError("internal", "token.create was acknowledged without the token")
    // A Token found by its idempotency key keeps its own credential, shown only when it was created.
    return tokenHandle(st.id, st.callback_url ?? "", st.id === id ? secret : "", st.expires_at)
  },
  /** A handle on an existing Token, to wait on it. */
  ref(id: string): Token {
    if (typeof id !== "string" || id === "") throw new TypeError("tokens.ref: id must be a non-empty string")
    return tokenHandle(id, "", "")
  },
})
