/** `HelmrClient`: the REST API (docs/api.md) with the spec's names. */
import type { AgentContract, AgentInput, AgentResult } from "../agent.js"
import { encodeJSON } from "../content.js"
import type { InputContent, JsonValue } from "../content.js"
import { parseDuration } from "../duration.js"
import { HelmrError } from "../errors.js"
import { uuidv7 } from "../uuid.js"
import type * as T from "./types.js"

export type * from "./types.js"

const apiErrorBrand = Symbol.for("helmr.sdk.APIError")

/** An error answer of the API: its stable `code`, the server's `requestId` when it sent one, and `details`. */
export class APIError extends HelmrError {
  readonly status: number
  readonly requestId?: string
  /** The delay, in milliseconds, that the answer's `Retry-After` header asked for before the request is sent again; absent when none. */
  readonly retryAfterMs?: number
  constructor(status: number, code: string, message?: string, details?: Record<string, unknown>, requestId?: string, retryAfterMs?: number) {
    super(code, message, details)
    this.name = "APIError"
    this.status = status
    if (requestId) this.requestId = requestId
    if (retryAfterMs !== undefined && retryAfterMs > 0) this.retryAfterMs = retryAfterMs
    Object.defineProperty(this, apiErrorBrand, { value: true })
  }
  /** An answer of the API only (not any HelmrError), also from another copy of the SDK. */
  static [Symbol.hasInstance](v: unknown): boolean {
    return typeof v === "object" && v !== null && (v as Record<symbol, unknown>)[apiErrorBrand] === true
  }
}

export interface HelmrClientOptions {
  /** The server. Default: env HELMR_API_URL, else `http://127.0.0.1:7070` (as the CLI). */
  readonly baseUrl?: string
  /** An API key (`hlmr_sk_…`). Default: env HELMR_API_KEY. */
  readonly apiKey?: string
  /** A fetch implementation (default: the global one). */
  readonly fetch?: typeof fetch
  /**
   * How an idempotent request (a GET, or one with an `idempotency_key`, which create, enqueue, send and the
   * controls carry) is retried when answered 503 with `Retry-After`, as the control plane answers while its
   * database is unreachable: after `Retry-After`, at most `maxDelayMs` (default 10000), at most `attempts`
   * tries in all (default 8), never past the request's `signal`. Other requests and errors are not retried.
   */
  readonly retry?: { readonly attempts?: number; readonly maxDelayMs?: number }
}

/** Reads a `Retry-After` header (seconds or an HTTP date) as milliseconds; undefined when absent, malformed or past. */
function parseRetryAfter(v: string | null, now = Date.now()): number | undefined {
  const t = v?.trim()
  if (!t) return undefined
  if (/^\d+$/.test(t)) return Number(t) > 0 ? Math.min(Number(t), 86_400) * 1000 : undefined
  const at = Date.parse(t)
  return Number.isNaN(at) || at <= now ? undefined : at - now
}

/** Whether a request may be sent again without doing twice what it does: a GET, or a JSON body with an idempotency_key. */
function idempotent(method: string, body: unknown): boolean {
  if (method === "GET") return true
  const k = typeof body === "object" && body !== null && !(body instanceof FormData) ? (body as Record<string, unknown>).idempotency_key : undefined
  return typeof k === "string" && k !== ""
}

// Keys whose values are user JSON (or wire shapes the spec keeps as sent): not converted to camelCase.
const rawKeys = new Set(["input", "result", "response", "content", "data", "metadata", "value", "answer", "details", "prompt", "input_schema", "result_schema", "runtime_mcp", "manifest", "env"])

function camel(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(camel)
  if (typeof v !== "object" || v === null) return v
  const out: Record<string, unknown> = {}
  for (const [k, x] of Object.entries(v)) {
    const ck = k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())
    out[ck] = rawKeys.has(k) ? x : camel(x)
  }
  return out
}

const enc = encodeURIComponent

/** Refuses input that is not finite JSON (JSON.stringify would send NaN as null, drop undefined, throw on bigint). */
function checkInput(v: unknown, what: string): void {
  encodeJSON(v, what, "input_invalid")
}

function timeoutMs(t: string | number): number {
  if (typeof t === "number") {
    if (!Number.isFinite(t) || t < 0) throw new TypeError("timeout must be a non-negative number of milliseconds or a Duration")
    return t
  }
  if (/^0+(\.0*)?(ms|s|m|h|d)$/.test(t)) return 0 // "0s": ask once, do not wait
  return parseDuration(t)
}

const sleep = (ms: number, signal?: AbortSignal) => new Promise<void>((resolve, reject) => {
  if (signal?.aborted) return reject(signal.reason)
  const t = setTimeout(resolve, ms)
  signal?.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason) }, { once: true })
})

/** The Helmr REST client. */
export class HelmrClient {
  readonly baseUrl: string
  private readonly apiKey: string
  private readonly fetchFn: typeof fetch
  private readonly retry: { readonly attempts: number; readonly maxDelayMs: number }

  constructor(options: HelmrClientOptions = {}) {
    const base = options.baseUrl ?? process.env.HELMR_API_URL ?? "http://127.0.0.1:7070"
    if (typeof base !== "string" || !/^https?:\/\//.test(base)) throw new TypeError(`HelmrClient: baseUrl ${JSON.stringify(base)} must be an http(s) URL`)
    this.baseUrl = base.replace(/\/+$/, "")
    this.apiKey = options.apiKey ?? process.env.HELMR_API_KEY ?? ""
    this.fetchFn = options.fetch ?? fetch
    this.retry = { attempts: Math.max(1, options.retry?.attempts ?? 8), maxDelayMs: Math.max(0, options.retry?.maxDelayMs ?? 10_000) }
  }

  /**
   * @internal One request; JSON in (snake_case as given) and out (camelCase). An idempotent request answered
   * 503 with Retry-After is sent again under the client's retry policy, unless `noRetry` (for loops that retry
   * on their own).
   */
  async request<R>(method: string, path: string, opts: { query?: Record<string, unknown>; body?: unknown; raw?: boolean; headers?: Record<string, string>; noRetry?: boolean } & T.RequestOptions = {}): Promise<R> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.requestOnce<R>(method, path, opts)
      } catch (e) {
        if (opts.noRetry || !(e instanceof APIError) || e.status !== 503 || e.retryAfterMs === undefined ||
          !idempotent(method, opts.body) || attempt >= this.retry.attempts || opts.signal?.aborted) throw e
        try { await sleep(Math.min(e.retryAfterMs, this.retry.maxDelayMs), opts.signal) } catch { throw e }
      }
    }
  }

  private async requestOnce<R>(method: string, path: string, opts: { query?: Record<string, unknown>; body?: unknown; raw?: boolean; headers?: Record<string, string> } & T.RequestOptions): Promise<R> {
    const url = new URL(this.baseUrl + path)
    for (const [k, v] of Object.entries(opts.query ?? {})) {
      if (v === undefined || v === null) continue
      if (Array.isArray(v)) v.forEach((x) => url.searchParams.append(k, String(x)))
      else url.searchParams.set(k, String(v))
    }
    const headers: Record<string, string> = { Accept: "application/json", ...opts.headers }
    if (this.apiKey && !headers.Authorization) headers.Authorization = `Bearer ${this.apiKey}`
    let body: RequestInit["body"] | undefined
    if (opts.body instanceof FormData) body = opts.body
    else if (opts.body !== undefined) { headers["Content-Type"] = "application/json"; body = JSON.stringify(opts.body) }
    const init: RequestInit = { method, headers }
    if (body !== undefined) init.body = body
    if (opts.signal) init.signal = opts.signal
    const res = await this.fetchFn(url, init)
    const text = await res.text()
    let json: unknown
    try { json = text ? JSON.parse(text) : undefined } catch { json = undefined }
    if (!res.ok) {
      const e = (json as { error?: { code?: string; message?: string; details?: Record<string, unknown> } } | undefined)?.error
      const rid = res.headers.get("x-request-id") ?? undefined
      throw new APIError(res.status, e?.code ?? (res.status === 401 ? "unauthorized" : res.status === 404 ? "not_found" : "internal"), e?.message ?? (text.slice(0, 200) || res.statusText), e?.details, rid,
        parseRetryAfter(res.headers.get("retry-after")))
    }
    return (opts.raw ? json : camel(json)) as R
  }

  /** Sessions: create, get, list, ref, attach. */
  readonly sessions = {
    create: (<A extends AgentContract = AgentContract<string, JsonValue, JsonValue>>(request: T.SessionCreateRequest<A>, options?: T.RequestOptions) => this.createSession(request, options)) as {
      <A extends AgentContract = AgentContract<string, JsonValue, JsonValue>>(request: T.SessionCreateRequest<A> & { readonly input: AgentInput<A> }, options?: T.RequestOptions): Promise<T.SessionCreateReceipt<A, T.TurnRefLike<A>>>
      <A extends AgentContract = AgentContract<string, JsonValue, JsonValue>>(request: T.SessionCreateRequest<A> & { readonly input?: undefined }, options?: T.RequestOptions): Promise<T.SessionCreateReceipt<A, null>>
      <A extends AgentContract = AgentContract<string, JsonValue, JsonValue>>(request: T.SessionCreateRequest<A>, options?: T.RequestOptions): Promise<T.SessionCreateReceipt<A>>
    },
    get: (id: string, options?: T.RequestOptions) => this.request<T.Session>("GET", `/v1/sessions/${enc(id)}`, { ...options }),
    list: async (query: T.SessionListQuery = {}, options?: T.RequestOptions): Promise<T.CursorPage<T.Session>> => {
      const q = query as Record<string, unknown>
      const status = q.status === undefined ? undefined : Array.isArray(q.status) ? (q.status as string[]).join(",") : q.status
      const page = await this.request<{ sessions: T.Session[]; nextCursor?: string }>("GET", "/v1/sessions", {
        ...options, query: { agent: q.agent, key: q.key, status, parent_session_id: q.parentSessionId, requester_session_id: q.requesterSessionId, cursor: q.cursor, limit: q.limit },
      })
      return page.nextCursor ? { items: page.sessions, nextCursor: page.nextCursor } : { items: page.sessions }
    },
    /** A local handle, without a network request; JSON types, no checked contract. */
    ref: (id: string): T.SessionRefLike => new SessionHandle(this, id),
    /**
     * A typed handle on an existing Session, after checking its actual Agent
     * and Deployment: the types hold only for the code deployed there.
     */
    attach: async <A extends AgentContract>(opts: { id: string; agent: A["id"]; deploymentId: string }, options?: T.RequestOptions): Promise<T.SessionRefLike<A>> => {
      if (typeof opts?.deploymentId !== "string" || opts.deploymentId === "") throw new TypeError("sessions.attach: deploymentId is required: the typed contract holds for one Deployment's code")
      const s = await this.sessions.get(opts.id, options)
      if (s.agent !== opts.agent) throw new HelmrError("conflict", `session ${opts.id} is of agent ${JSON.stringify(s.agent)}, not ${JSON.stringify(opts.agent)}`, { agent: s.agent })
      if (s.deploymentId !== opts.deploymentId) throw new HelmrError("conflict", `session ${opts.id} is pinned to deployment ${s.deploymentId}, not ${opts.deploymentId}`, { deployment_id: s.deploymentId })
      return new SessionHandle<A>(this, s.id)
    },
  }

  private async createSession(request: T.SessionCreateRequest<AgentContract>, options?: T.RequestOptions): Promise<T.SessionCreateReceipt<AgentContract>> {
    if (typeof request !== "object" || request === null || typeof request.agent !== "string" || request.agent === "") throw new TypeError("sessions.create: agent is required")
    const body: Record<string, unknown> = { agent: request.agent, idempotency_key: request.idempotencyKey ?? uuidv7() }
    if (request.input !== undefined) {
      checkInput(request.input, "sessions.create: input")
      body.input = request.input
    }
    if (request.key !== undefined) body.key = request.key
    if (request.computer) body.computer_id = request.computer.id
    if (request.slack) body.slack = { channel_id: request.slack.channelId }
    const r = await this.request<{ session: T.Session; turn: T.TurnState | null }>("POST", "/v1/sessions", { ...options, body })
    const session = new SessionHandle(this, r.session.id)
    return { session, turn: r.turn ? new TurnHandle(this, r.session.id, r.turn.id) : null }
  }

  /** Agents of a Deployment. */
  readonly agents = {
    get: (id: string, query: { deploymentId?: string } = {}, options?: T.RequestOptions) =>
      this.request<T.AgentInfo>("GET", `/v1/agents/${enc(id)}`, { ...options, query: { deployment_id: query.deploymentId } }),
    list: async (query: { deploymentId?: string; cursor?: string; limit?: number } = {}, options?: T.RequestOptions): Promise<T.AgentPage> => {
      const p = await this.request<{ deploymentId: string; agents: T.AgentInfo[]; nextCursor?: string }>("GET", "/v1/agents", { ...options, query: { deployment_id: query.deploymentId, cursor: query.cursor, limit: query.limit } })
      return p.nextCursor ? { deploymentId: p.deploymentId, items: p.agents, nextCursor: p.nextCursor } : { deploymentId: p.deploymentId, items: p.agents }
    },
  }

  /** Tokens: read, complete (API key, or the Token's public credential), cancel. */
  readonly tokens = {
    get: (id: string, options?: T.RequestOptions) => this.request<T.TokenState>("GET", `/v1/tokens/${enc(id)}`, { ...options }),
    complete: (id: string, body: { result?: JsonValue; data?: JsonValue; idempotencyKey?: string; publicAccessToken?: string } = {}, options?: T.RequestOptions) => {
      const b: Record<string, unknown> = { data: body.data !== undefined ? body.data : body.result !== undefined ? body.result : null }
      if (body.idempotencyKey) b.idempotency_key = body.idempotencyKey
      const headers: Record<string, string> = { ...options?.headers }
      if (body.publicAccessToken) headers.Authorization = `Bearer ${body.publicAccessToken}`
      return this.request<T.TokenCompletion>("POST", `/v1/tokens/${enc(id)}/complete`, { ...options, headers, body: b })
    },
    cancel: (id: string, opts: { idempotencyKey?: string } = {}, options?: T.RequestOptions) =>
      this.request<T.TokenState>("POST", `/v1/tokens/${enc(id)}/cancel`, { ...options, body: opts.idempotencyKey ? { idempotency_key: opts.idempotencyKey } : {} }),
  }

  /** Computers, as the Go client has them. */
  readonly computers = {
    create: (template: string, opts: { deploymentId?: string; key?: string; idempotencyKey?: string } = {}, options?: T.RequestOptions) =>
      this.request<T.ComputerState>("POST", "/v1/computers", { ...options, body: dropUndefined({ template, deployment_id: opts.deploymentId, key: opts.key, idempotency_key: opts.idempotencyKey ?? uuidv7() }) }),
    get: (id: string, options?: T.RequestOptions) => this.request<T.ComputerState>("GET", `/v1/computers/${enc(id)}`, { ...options }),
    getByKey: async (key: string, options?: T.RequestOptions) => {
      const p = await this.request<{ computers: T.ComputerState[] }>("GET", "/v1/computers", { ...options, query: { key } })
      if (!p.computers.length) throw new APIError(404, "not_found", `no computer has the key ${JSON.stringify(key)}`)
      return p.computers[0]
    },
    list: async (query: { cursor?: string; limit?: number } = {}, options?: T.RequestOptions): Promise<T.CursorPage<T.ComputerState>> => {
      const p = await this.request<{ computers: T.ComputerState[]; nextCursor?: string }>("GET", "/v1/computers", { ...options, query })
      return p.nextCursor ? { items: p.computers, nextCursor: p.nextCursor } : { items: p.computers }
    },
    members: async (id: string, query: { cursor?: string; limit?: number } = {}, options?: T.RequestOptions): Promise<T.CursorPage<T.ComputerMember>> => {
      const p = await this.request<{ members: T.ComputerMember[]; nextCursor?: string }>("GET", `/v1/computers/${enc(id)}/members`, { ...options, query })
      return p.nextCursor ? { items: p.members, nextCursor: p.nextCursor } : { items: p.members }
    },
    delete: (id: string, options?: T.RequestOptions) => this.request<T.ComputerState>("DELETE", `/v1/computers/${enc(id)}`, { ...options }),
    exec: (id: string, req: T.CommandRequest, options?: T.RequestOptions) =>
      this.request<T.CommandState>("POST", `/v1/computers/${enc(id)}/commands`, { ...options, body: dropUndefined({ command: req.command, cwd: req.cwd, env: req.env, stdin: req.stdin, timeout: req.timeout, idempotency_key: req.idempotencyKey ?? uuidv7() }) }),
  }

  /** Commands run on Computers. */
  readonly commands = {
    get: (id: string, options?: T.RequestOptions) => this.request<T.CommandState>("GET", `/v1/commands/${enc(id)}`, { ...options }),
    cancel: (id: string, options?: T.RequestOptions) => this.request<T.CommandState>("POST", `/v1/commands/${enc(id)}/cancel`, { ...options, body: {} }),
    wait: async (id: string, options?: T.RequestOptions): Promise<T.CommandState> => {
      for (;;) {
        const r = await this.request<{ status: string; command?: T.CommandState }>("GET", `/v1/commands/${enc(id)}/wait`, { ...options, query: { timeout: "50s" } })
        if (r.status !== "timeout" && r.command) return r.command
      }
    },
    logs: async (id: string, query: { after?: number; limit?: number } = {}, options?: T.RequestOptions): Promise<T.CommandLogPage> => {
      const p = await this.request<{ records: Array<{ sequence: number; stream: "stdout" | "stderr"; data: string; at: string }>; nextAfter: number; done: boolean }>("GET", `/v1/commands/${enc(id)}/logs`, { ...options, query })
      return { ...p, records: p.records.map((r) => ({ ...r, data: new Uint8Array(Buffer.from(r.data ?? "", "base64")) })) }
    },
  }

  /** Deployments: read, and publish a bundle or binary (as `helmr deploy` does). */
  readonly deployments = {
    list: async (query: { cursor?: string; limit?: number } = {}, options?: T.RequestOptions): Promise<T.CursorPage<T.Deployment>> => {
      const p = await this.request<{ deployments: T.Deployment[]; nextCursor?: string }>("GET", "/v1/deployments", { ...options, query })
      return p.nextCursor ? { items: p.deployments, nextCursor: p.nextCursor } : { items: p.deployments }
    },
    get: (id: string, options?: T.RequestOptions) => this.request<T.Deployment>("GET", `/v1/deployments/${enc(id)}`, { ...options }),
    create: (upload: { binary: Uint8Array; manifest?: string; sources?: Uint8Array }, options?: T.RequestOptions) => {
      const form = new FormData()
      form.append("binary", new Blob([upload.binary as Uint8Array<ArrayBuffer>]), "agent")
      if (upload.manifest !== undefined) form.append("manifest", new Blob([upload.manifest], { type: "application/json" }), "manifest.json")
      if (upload.sources) form.append("sources", new Blob([upload.sources as Uint8Array<ArrayBuffer>], { type: "application/x-tar" }), "sources.tar")
      return this.request<T.Deployment>("POST", "/v1/deployments", { ...options, body: form })
    },
  }
}

function dropUndefined(o: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined))
}

function withKey(opts: { idempotencyKey?: string } | undefined, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...extra, idempotency_key: opts?.idempotencyKey ?? uuidv7() }
}

/** A handle on a Session (the spec's `SessionRef`). */
class SessionHandle<A extends AgentContract = AgentContract<string, JsonValue, JsonValue>> implements T.SessionRefLike<A> {
  constructor(private readonly client: HelmrClient, readonly id: string) {}
  private get path() { return `/v1/sessions/${enc(this.id)}` }

  get(options?: T.RequestOptions): Promise<T.Session> { return this.client.sessions.get(this.id, options) }

  async enqueue(input: AgentInput<A>, opts?: { idempotencyKey?: string }, options?: T.RequestOptions): Promise<T.TurnRefLike<A>> {
    checkInput(input, "enqueue: input")
    const t = await this.client.request<T.TurnState>("POST", `${this.path}/turns`, { ...options, body: withKey(opts, { input }) })
    return new TurnHandle<A>(this.client, this.id, t.id)
  }

  readonly turns = {
    ref: (id: string): T.TurnRefLike<A> => new TurnHandle<A>(this.client, this.id, id),
    list: async (query: { cursor?: string; limit?: number } = {}, options?: T.RequestOptions) => {
      const p = await this.client.request<{ turns: T.TurnState[]; nextCursor?: string }>("GET", `${this.path}/turns`, { ...options, query })
      return (p.nextCursor ? { items: p.turns, nextCursor: p.nextCursor } : { items: p.turns }) as T.CursorPage<T.TurnState<AgentInput<A>, AgentResult<A>>>
    },
  }

  readonly events = {
    list: (query: { after?: number; limit?: number } = {}, options?: T.RequestOptions) =>
      this.client.request<T.SessionEventPage>("GET", `${this.path}/events`, { ...options, query }),
    stream: (query: { after?: number } = {}, options?: T.RequestOptions): AsyncIterableIterator<T.SessionEvent> =>
      streamEvents(this.client, this.path, query.after ?? 0, options),
  }

  interrupt(opts?: { idempotencyKey?: string }, options?: T.RequestOptions) {
    return this.client.request<T.SessionInterruptReceipt>("POST", `${this.path}/interrupt`, { ...options, body: withKey(opts) })
  }
  async resume(opts: { holdId: string; idempotencyKey?: string }, options?: T.RequestOptions): Promise<T.SessionResumeReceipt> {
    if (!opts?.holdId) throw new TypeError("resume: holdId is required")
    return this.client.request<T.SessionResumeReceipt>("POST", `${this.path}/resume`, { ...options, body: withKey(opts, { hold_id: opts.holdId }) })
  }
  close(opts?: { idempotencyKey?: string }, options?: T.RequestOptions) {
    return this.client.request<T.SessionCloseReceipt>("POST", `${this.path}/close`, { ...options, body: withKey(opts) })
  }
  cancel(opts?: { idempotencyKey?: string }, options?: T.RequestOptions) {
    return this.client.request<T.SessionCancelReceipt>("POST", `${this.path}/cancel`, { ...options, body: withKey(opts) })
  }
}

/**
 * An AskState with its question's answer spec in camelCase (`allowText`):
 * `answer` is a raw key elsewhere (a responder's answer), but the question's
 * answer spec is an API shape. Option values stay as sent.
 */
function askState(a: T.AskState): T.AskState {
  const q = a?.question as { answer?: unknown } | undefined
  if (!q || typeof q.answer !== "object" || q.answer === null) return a
  return { ...a, question: { ...a.question, answer: camel(q.answer) as T.AskState["question"]["answer"] } }
}

/** A handle on a Turn (the spec's `TurnRef`). */
class TurnHandle<A extends AgentContract = AgentContract<string, JsonValue, JsonValue>> implements T.TurnRefLike<A> {
  constructor(private readonly client: HelmrClient, readonly sessionId: string, readonly id: string) {}
  private get path() { return `/v1/sessions/${enc(this.sessionId)}/turns/${enc(this.id)}` }

  get(options?: T.RequestOptions): Promise<T.TurnState<AgentInput<A>, AgentResult<A>>> { return this.client.request("GET", this.path, { ...options }) }

  /** Waits until the Turn settles; with `timeout`, at most that long (a timeout never cancels the Turn). */
  wait(options?: { signal?: AbortSignal; timeout?: undefined }): Promise<T.TurnOutcome<AgentResult<A>>>
  wait(options: { timeout: string | number; signal?: AbortSignal }): Promise<T.TimedTurnWaitResult<AgentResult<A>>>
  async wait(options: { timeout?: string | number; signal?: AbortSignal } = {}): Promise<unknown> {
    const deadline = options.timeout === undefined ? undefined : Date.now() + timeoutMs(options.timeout)
    let failures = 0
    let asked = false
    for (;;) {
      let chunk = 60_000
      if (deadline !== undefined) {
        const left = deadline - Date.now()
        // Ask at least once, so a settled Turn is reported even with a zero timeout.
        if (left <= 0 && asked) return { status: "timeout" }
        chunk = Math.min(chunk, Math.max(0, left))
      }
      const started = Date.now()
      let r: T.TimedTurnWaitResult
      try {
        r = await this.client.request<T.TimedTurnWaitResult>("GET", `${this.path}/wait`, { signal: options.signal, query: { timeout: `${Math.ceil(chunk)}ms` }, noRetry: true })
      } catch (e) {
        if (options.signal?.aborted) throw e
        // Transient: the network or an unavailable server; anything else is final.
        if (e instanceof APIError && e.status < 500) throw e
        if (++failures >= 10) throw e
        await sleep(e instanceof APIError && e.retryAfterMs !== undefined ? Math.min(e.retryAfterMs, 10_000) : Math.min(100 * 2 ** failures, 2000), options.signal)
        continue
      }
      failures = 0
      asked = true
      if (r.status === "settled") return deadline === undefined ? r.outcome : r
      if (Date.now() - started < chunk / 10) await sleep(50, options.signal)
    }
  }

  async send(message: InputContent, opts?: { idempotencyKey?: string }, options?: T.RequestOptions): Promise<T.MessageReceipt> {
    checkInput(message, "send: message")
    return this.client.request<T.MessageReceipt>("POST", `${this.path}/messages`, { ...options, body: withKey(opts, { content: message }) })
  }

  interrupt(opts?: { idempotencyKey?: string }, options?: T.RequestOptions) {
    return this.client.request<T.TurnInterruptReceipt>("POST", `${this.path}/interrupt`, { ...options, body: withKey(opts) })
  }

  readonly asks: T.TurnAsks = {
    list: async (query = {}, options) => {
      const p = await this.client.request<{ asks: T.AskState[]; nextCursor?: string }>("GET", `${this.path}/asks`, { ...options, query })
      const items = p.asks.map(askState)
      return p.nextCursor ? { items, nextCursor: p.nextCursor } : { items }
    },
    get: async (askId, options) => askState(await this.client.request<T.AskState>("GET", `${this.path}/asks/${enc(askId)}`, { ...options })),
    respond: async (askId, body, options) => {
      if (!body?.responseId) throw new TypeError("asks.respond: responseId is required (reuse it to retry)")
      return askState(await this.client.request<T.AskState>("POST", `${this.path}/asks/${enc(askId)}/respond`, { ...options, body: { answer: body.answer, response_id: body.responseId } }))
    },
  }
}

/** Follows a Session's timeline over SSE, resuming with Last-Event-ID; stop it with `signal` or `return()`. */
async function* streamEvents(client: HelmrClient, path: string, after: number, options?: T.RequestOptions): AsyncIterableIterator<T.SessionEvent> {
  let last = after
  let failures = 0
  const stop = new AbortController()
  const onAbort = () => stop.abort(options?.signal?.reason)
  options?.signal?.addEventListener("abort", onAbort, { once: true })
  try {
    while (!stop.signal.aborted) {
      let res: Response
      try {
        const headers: Record<string, string> = { Accept: "text/event-stream", "Last-Event-ID": String(last), ...options?.headers }
        const key = (client as unknown as { apiKey: string }).apiKey
        if (key) headers.Authorization = `Bearer ${key}`
        res = await (client as unknown as { fetchFn: typeof fetch }).fetchFn(`${client.baseUrl}${path}/events?after=${last}`, { headers, signal: stop.signal })
      } catch (e) {
        if (stop.signal.aborted) return
        if (++failures >= 10) throw e
        await sleep(Math.min(100 * 2 ** failures, 2000), stop.signal).catch(() => {})
        continue
      }
      if (!res.ok) {
        const text = await res.text()
        let e: { code?: string; message?: string; details?: Record<string, unknown> } | undefined
        try { e = JSON.parse(text).error } catch { /* not JSON */ }
        if (res.status < 500) throw new APIError(res.status, e?.code ?? "internal", e?.message ?? text, e?.details)
        const retryAfterMs = parseRetryAfter(res.headers.get("retry-after"))
        if (++failures >= 10) throw new APIError(res.status, e?.code ?? "unavailable", e?.message ?? text, undefined, undefined, retryAfterMs)
        await sleep(retryAfterMs !== undefined ? Math.min(retryAfterMs, 10_000) : Math.min(100 * 2 ** failures, 2000), stop.signal).catch(() => {})
        continue
      }
      failures = 0
      const decoder = new TextDecoder()
      let buf = ""
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buf += decoder.decode(chunk, { stream: true })
          let i: number
          while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
            const frame = buf.slice(0, i)
            buf = buf.slice(i).replace(/^\r?\n\r?\n/, "")
            let id: string | undefined
            const data: string[] = []
            for (const line of frame.split(/\r?\n/)) {
              if (line.startsWith(":")) continue
              const c = line.indexOf(":")
              const field = c < 0 ? line : line.slice(0, c)
              const value = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "")
              if (field === "id") id = value
              else if (field === "data") data.push(value)
            }
            if (!data.length) continue
            const ev = camel(JSON.parse(data.join("\n"))) as T.SessionEvent
            if (ev.sequence <= last) continue
            last = id !== undefined && /^\d+$/.test(id) ? Number(id) : ev.sequence
            yield ev
          }
        }
      } catch (e) {
        if (stop.signal.aborted) return
      }
      await sleep(100, stop.signal).catch(() => {})
    }
  } finally {
    options?.signal?.removeEventListener("abort", onAbort)
    stop.abort()
  }
}
