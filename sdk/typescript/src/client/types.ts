/** Types of the REST API as the client returns them (camelCase; user JSON stays as sent). */
import type { AgentContract, AgentInput, AgentResult } from "../agent.js"
import type { Content, InputContent, JsonValue } from "../content.js"
import type { Retention } from "../duration.js"
import type { RuntimeMcpPolicy } from "../policy.js"
import type { InputSource } from "../turn.js"

/** Per-request options. */
export interface RequestOptions {
  readonly signal?: AbortSignal
  /** Extra headers for this request. */
  readonly headers?: Readonly<Record<string, string>>
}

export type SessionStatus = "open" | "closing" | "closed"
export type TurnStatus = "queued" | "running" | "completed" | "failed" | "interrupted" | "cancelled"

export interface TurnError { readonly code: string; readonly message?: string }

export interface Hold {
  readonly id: string | null
  readonly sessionId: string | null
  readonly kind: "interrupt" | "process_failed" | "recovery_gap" | "storage_pressure"
  readonly recoveryGap?: unknown
  readonly reason?: string
  readonly createdAt: string
  readonly canRelease: boolean
}

export interface Session {
  readonly id: string
  readonly deploymentId: string
  readonly rootSessionId: string
  readonly agent: string
  readonly template: string
  readonly computerId: string | null
  readonly parentSessionId: string | null
  readonly requesterSessionId: string | null
  readonly key?: string
  readonly slackChannelId?: string
  readonly status: SessionStatus
  readonly closeAfterIdle: Retention
  readonly hibernateAfterIdle?: Retention
  readonly maxTurnDuration?: string
  readonly idleSince: string | null
  readonly initialTurn: { readonly id: string; readonly status: TurnStatus } | null
  readonly holds: readonly Hold[]
  readonly createdAt: string
}

export interface TurnState<I = JsonValue, R = JsonValue> {
  readonly id: string
  readonly sessionId: string
  readonly sequence: number
  readonly status: TurnStatus
  readonly input?: I
  readonly source?: InputSource
  readonly createdAt?: string
  readonly startedAt?: string
  readonly terminalAt?: string
  readonly result?: R
  readonly response?: Content
  readonly error?: TurnError
  readonly payloadExpiredAt?: string
}

/** A settled Turn's outcome; narrow `status` and `payloadExpiredAt` before reading payload fields. */
export type TurnOutcome<R = JsonValue> =
  | { readonly status: "completed"; readonly result: R; readonly response?: Content; readonly payloadExpiredAt?: undefined; readonly error?: undefined }
  | { readonly status: "completed"; readonly payloadExpiredAt: string; readonly result?: undefined; readonly response?: undefined; readonly error?: undefined }
  | { readonly status: "failed"; readonly error?: TurnError; readonly result?: undefined; readonly response?: undefined; readonly payloadExpiredAt?: string }
  | { readonly status: "interrupted" | "cancelled"; readonly error?: TurnError; readonly result?: undefined; readonly response?: undefined; readonly payloadExpiredAt?: string }

export type TimedTurnWaitResult<R = JsonValue> = { readonly status: "timeout" } | { readonly status: "settled"; readonly outcome: TurnOutcome<R> }

export interface CursorPage<T> { readonly items: readonly T[]; readonly nextCursor?: string }

export type SessionListQuery =
  | { readonly parentSessionId?: string; readonly requesterSessionId?: string; readonly status?: SessionStatus | readonly SessionStatus[]; readonly cursor?: string; readonly limit?: number; readonly agent?: string; readonly key?: undefined }
  | { readonly agent: string; readonly key: string }

export interface SessionCreateRequest<A extends AgentContract = AgentContract<string, JsonValue, JsonValue>> {
  readonly agent: A["id"]
  readonly input?: AgentInput<A>
  readonly slack?: Readonly<{ channelId: string }>
  readonly computer?: Readonly<{ id: string }>
  readonly key?: string
  readonly idempotencyKey?: string
}

export interface SessionCreateReceipt<A extends AgentContract = AgentContract<string, JsonValue, JsonValue>, T = TurnRefLike<A> | null> {
  readonly session: SessionRefLike<A>
  readonly turn: T
}

export interface SessionInterruptReceipt { readonly id: string; readonly sessionId: string; readonly status: "accepted"; readonly holdId: string }
export type SessionResumeReceipt = SessionInterruptReceipt
export interface SessionCloseReceipt { readonly sessionId: string; readonly status: "closing" | "closed" }
export interface SessionCancelReceipt { readonly sessionId: string; readonly status: "closed" }
export interface MessageReceipt { readonly id: string; readonly status: "accepted" }
export interface TurnInterruptReceipt { readonly id: string; readonly sessionId: string; readonly turnId: string; readonly status: "accepted" }

export type SessionEventKind =
  | "turn.queued" | "turn.running" | "turn.finalizing" | "turn.completed" | "turn.failed" | "turn.interrupted" | "turn.cancelled" | "turn.output"
  | "message.admitted" | "message.started" | "message.delivered" | "message.rejected"
  | "ask.created" | "ask.responded" | "ask.cancelled"
  | "session.interrupt" | "session.resume" | "session.close" | "session.cancel" | "session.closed" | "session.cancelled"
  | "session.process_stopped" | "session.process_failed" | "session.deadline" | "slack.delivery_unavailable"
  | "wait.started" | "wait.suspended" | "wait.resumed" | "wait.resolved"

/** One timeline record; `data` is as the REST API writes it (snake_case). */
export interface SessionEvent {
  readonly sessionId: string
  readonly turnId: string | null
  readonly sequence: number
  readonly createdAt: string
  readonly kind: SessionEventKind | (string & {})
  readonly data: Readonly<Record<string, unknown>>
}

export interface SessionEventPage {
  readonly records: readonly SessionEvent[]
  readonly nextAfter: number
  readonly hasMore: boolean
  readonly retainedAfter: number
}

export interface AskState {
  readonly id: string
  readonly sessionId: string
  readonly turnId: string
  readonly status: "pending" | "responded" | "cancelled"
  readonly question: { readonly prompt: Content; readonly answer: { readonly type: "text" | "choice"; readonly options?: readonly { id: string; label: string; value: JsonValue; description?: string }[]; readonly multiple?: boolean; readonly allowText?: boolean } }
  readonly answer?: JsonValue
  readonly respondedBy?: { readonly kind: string; readonly id?: string }
  readonly responseId?: string
  readonly createdAt: string
  readonly respondedAt?: string
  readonly cancelledAt?: string
}

/** An answer: a string for a text question; `{selected: [id | {id, value}], text?}` for a choice. */
export type AskResponse = string | { readonly selected: readonly (string | { readonly id: string; readonly value?: JsonValue })[]; readonly text?: string }

export interface TurnAsks {
  list(query?: { cursor?: string; limit?: number }, options?: RequestOptions): Promise<CursorPage<AskState>>
  get(askId: string, options?: RequestOptions): Promise<AskState>
  respond(askId: string, body: { answer: AskResponse; responseId: string }, options?: RequestOptions): Promise<AskState>
}

export interface TurnRefLike<A extends AgentContract = AgentContract<string, JsonValue, JsonValue>> {
  readonly id: string
  readonly sessionId: string
  get(options?: RequestOptions): Promise<TurnState<AgentInput<A>, AgentResult<A>>>
  wait(options?: { signal?: AbortSignal; timeout?: undefined }): Promise<TurnOutcome<AgentResult<A>>>
  wait(options: { timeout: string | number; signal?: AbortSignal }): Promise<TimedTurnWaitResult<AgentResult<A>>>
  send(message: InputContent, opts?: { idempotencyKey?: string }, options?: RequestOptions): Promise<MessageReceipt>
  interrupt(opts?: { idempotencyKey?: string }, options?: RequestOptions): Promise<TurnInterruptReceipt>
  readonly asks: TurnAsks
}

export interface SessionRefLike<A extends AgentContract = AgentContract<string, JsonValue, JsonValue>> {
  readonly id: string
  get(options?: RequestOptions): Promise<Session>
  enqueue(input: AgentInput<A>, opts?: { idempotencyKey?: string }, options?: RequestOptions): Promise<TurnRefLike<A>>
  readonly turns: {
    ref(id: string): TurnRefLike<A>
    list(query?: { cursor?: string; limit?: number }, options?: RequestOptions): Promise<CursorPage<TurnState<AgentInput<A>, AgentResult<A>>>>
  }
  readonly events: {
    list(query?: { after?: number; limit?: number }, options?: RequestOptions): Promise<SessionEventPage>
    stream(query?: { after?: number }, options?: RequestOptions): AsyncIterableIterator<SessionEvent>
  }
  interrupt(opts?: { idempotencyKey?: string }, options?: RequestOptions): Promise<SessionInterruptReceipt>
  resume(opts: { holdId: string; idempotencyKey?: string }, options?: RequestOptions): Promise<SessionResumeReceipt>
  close(opts?: { idempotencyKey?: string }, options?: RequestOptions): Promise<SessionCloseReceipt>
  cancel(opts?: { idempotencyKey?: string }, options?: RequestOptions): Promise<SessionCancelReceipt>
}

/** The spec's `SessionRef`: a handle on a Session (typed by a definition, or JSON types for `ref(id)`). */
export type SessionRef<A extends AgentContract = AgentContract<string, JsonValue, JsonValue>> = SessionRefLike<A>
/** The spec's `TurnRef`: a handle on a Turn. */
export type TurnRef<A extends AgentContract = AgentContract<string, JsonValue, JsonValue>> = TurnRefLike<A>

export interface AgentInfo {
  readonly agent: string
  readonly template: string
  readonly deploymentId: string
  readonly inputKind: "text" | "json"
  readonly inputSchema?: Readonly<Record<string, unknown>>
  readonly resultSchema?: Readonly<Record<string, unknown>>
  readonly closeAfterIdle: Retention
  readonly hibernateAfterIdle: Retention
  readonly maxTurnDuration?: string
  readonly runtimeMcp: RuntimeMcpPolicy
}

export interface AgentPage { readonly deploymentId: string; readonly items: readonly AgentInfo[]; readonly nextCursor?: string }

export interface TokenState {
  readonly id: string
  readonly sessionId?: string
  readonly turnId?: string
  readonly status: "pending" | "completed" | "cancelled" | "expired"
  readonly tags: readonly string[]
  readonly metadata?: Readonly<Record<string, JsonValue>>
  readonly data?: JsonValue
  readonly callbackUrl?: string
  readonly createdAt: string
  readonly expiresAt?: string
  readonly completedAt?: string
  readonly cancelledAt?: string
  readonly expiredAt?: string
}

export interface TokenCompletion { readonly status: "completed" | "already_completed"; readonly token: TokenState }

export interface ComputerState {
  readonly id: string
  readonly template: string
  readonly deploymentId: string
  readonly key?: string
  readonly status: "available" | "deleting" | "deleted"
  readonly residency: string
  readonly error?: TurnError
  readonly createdAt: string
  readonly deletedAt?: string
}

export interface ComputerMember { readonly kind: "session" | "command"; readonly id: string; readonly status: string }

export interface CommandRequest {
  readonly command: readonly string[]
  readonly cwd?: string
  readonly env?: Readonly<Record<string, string>>
  readonly stdin?: string
  readonly timeout?: string
  readonly idempotencyKey?: string
}

export interface CommandState {
  readonly id: string
  readonly computerId: string
  readonly command: readonly string[]
  readonly cwd: string
  readonly status: string
  readonly exitCode?: number
  readonly error?: TurnError
  readonly createdAt: string
  readonly startedAt?: string
  readonly endedAt?: string
}

export interface CommandLogRecord { readonly sequence: number; readonly stream: "stdout" | "stderr"; readonly data: Uint8Array; readonly at: string }
export interface CommandLogPage { readonly records: readonly CommandLogRecord[]; readonly nextAfter: number; readonly done: boolean }

export interface Deployment {
  readonly id: string
  readonly digest: string
  readonly sourcesDigest?: string
  readonly current: boolean
  readonly agents: readonly string[]
  readonly manifest: Readonly<Record<string, unknown>>
  readonly createdAt: string
}
