/** `agent()` and `actor()`: Agent definitions, their contexts and type inference. */
import type { StandardSchemaV1 } from "@standard-schema/spec"
import type { InputContent, JsonValue } from "./content.js"
import { checkRetention, parseDuration } from "./duration.js"
import type { Duration, Retention } from "./duration.js"
import type { RuntimeMcpPolicy } from "./policy.js"
import { checkPolicy } from "./policy.js"
import { isStandardSchema } from "./schema.js"
import type { Template } from "./template.js"
import { isTemplate } from "./template.js"
import type { MaybePromise, Turn } from "./turn.js"
import { checkTriggers } from "./triggers.js"
import type { Trigger, TriggerManifest } from "./triggers.js"

/** The scoped connection to the runtime MCP server (any MCP client over Streamable HTTP). */
export interface RuntimeMcpConnectionOptions {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
}

/** The Computer a Session runs on. */
export interface ComputerIdentity { readonly id: string }

/** What `init` gets. */
export interface InitContext {
  readonly mcp: Readonly<{ getConnectionOptions(policy?: RuntimeMcpPolicy): Promise<RuntimeMcpConnectionOptions> }>
  readonly session: Readonly<{ id: string; key?: string; parent?: Readonly<{ id: string }> }>
  readonly computer: ComputerIdentity
  readonly deployment: Readonly<{ id: string }>
  readonly recovery: Readonly<{ kind: "initial" | "reconstructed"; reason?: string }>
  readonly signal: AbortSignal
}

/** What `turn` gets: the InitContext plus `init`'s result. */
export interface AgentContext<S> extends InitContext {
  readonly initResult: S
}

type InputOf<IS> = IS extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<IS> : InputContent
type ClientInputOf<IS> = IS extends StandardSchemaV1 ? StandardSchemaV1.InferInput<IS> : InputContent
type ResultOf<RS, R> = RS extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<RS> : Awaited<R>

interface CommonConfig<Id extends string, S, IS> {
  /** Definition ID, matching `^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`. */
  readonly id: Id
  /** The template() new Sessions' Computers are made from. */
  readonly template: Template
  /** Runtime MCP maximum; omit for the Deployment's Agent set with new Computer placement. */
  readonly runtimeMcp?: RuntimeMcpPolicy
  /** Runs once per Session process before its first Turn; its value is `ctx.initResult`. */
  readonly init?: (ctx: InitContext) => MaybePromise<S>
  /** Validates incoming JSON before the handler; `turn.input` is its output. Without it input is text Content. */
  readonly inputSchema?: IS
  /** Closes the Session after it stays idle this long. Default `"7d"`. */
  readonly closeAfterIdle?: Retention
  /** Hibernates the Session's Computer after it stays idle this long. Default `"never"`. */
  readonly hibernateAfterIdle?: Retention
  /** A running Turn reaches its deadline after this long. No limit when omitted. */
  readonly maxTurnDuration?: Duration
  /** The default hot-wait of this Agent's waits (1ms–1h; server default 30s). */
  readonly idleTimeout?: Duration
  /**
   * Cron triggers (`triggers.cron(name, pattern, { timezone, input })`): each
   * fire admits a fresh Session whose first Turn has the trigger's input,
   * typed as this Agent's client input.
   */
  readonly triggers?: readonly Trigger<NoInfer<ClientInputOf<IS>>>[]
}

/** The config of `agent()`. */
export interface AgentConfig<Id extends string, S, IS, RS, R> extends CommonConfig<Id, S, IS> {
  /** Validates or transforms the handler's return value. The persisted result must be finite JSON. */
  readonly resultSchema?: RS
  /** Handles one Turn; its return value (after resultSchema) is the Turn's result. */
  readonly turn: (turn: Turn<InputOf<IS>>, ctx: AgentContext<S>) => MaybePromise<R>
}

/** A Turn received by an Actor: complete or fail it, or receive the next one. */
export interface ActorTurn<I, R> extends Turn<I> {
  /** Completes the Turn with `result`. */
  complete(result: R): void
  /** Fails the Turn with `error`. */
  fail(error: unknown): void
}

/** An Actor's Session: one loop receives the Turns, FIFO. */
export interface ActorSession<I, R> {
  /**
   * The next Turn, or `null` when the Session process is stopping (the
   * Session closing drained it). Receiving completes the previous Turn with
   * `undefined` if it was neither completed nor failed.
   */
  receive(options?: { signal?: AbortSignal }): Promise<ActorTurn<I, R> | null>
}

/** The config of `actor()`. */
export interface ActorConfig<Id extends string, S, IS, RS> extends CommonConfig<Id, S, IS> {
  readonly resultSchema?: RS
  /** The Actor's loop: runs once per Session process, after `init`. */
  readonly run: (session: ActorSession<InputOf<IS>, RS extends StandardSchemaV1 ? StandardSchemaV1.InferInput<RS> : JsonValue | undefined>, ctx: AgentContext<S>) => MaybePromise<void>
}

/** What typed client calls need of a definition: its ID and its invocation types. */
export interface AgentContract<Id extends string = string, I = unknown, R = unknown> {
  readonly id: Id
  readonly "~types"?: { readonly input: I; readonly result: R }
}

/** A frozen Agent definition (`kind: "agent"`). Use `typeof yourAgent` with typed client calls. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- S is contravariant in turn(); any lets every definition be an AgentDefinition
export interface AgentDefinition<Id extends string = string, I = unknown, R = unknown, S = any> extends AgentContract<Id, I, R> {
  readonly kind: "agent"
  readonly template: Template
  readonly runtimeMcp?: RuntimeMcpPolicy
  readonly inputSchema?: StandardSchemaV1
  readonly resultSchema?: StandardSchemaV1
  readonly closeAfterIdle: Retention
  readonly hibernateAfterIdle: Retention
  readonly maxTurnDuration?: Duration
  readonly idleTimeout?: Duration
  /** The triggers' manifest entries, inputs resolved (present when `triggers` was given). */
  readonly triggers?: readonly TriggerManifest[]
  readonly actor: boolean
  readonly init?: (ctx: InitContext) => MaybePromise<S>
  readonly turn?: (turn: Turn<any>, ctx: AgentContext<S>) => unknown
  readonly run?: (session: ActorSession<any, any>, ctx: AgentContext<S>) => MaybePromise<void>
}

/** The client input type of a definition. */
export type AgentInput<A extends AgentContract> = NonNullable<A["~types"]>["input"]
/** The persisted result type of a definition. */
export type AgentResult<A extends AgentContract> = NonNullable<A["~types"]>["result"]

const idPattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/
const agentBrand = Symbol.for("helmr.sdk.Agent")

function check(config: CommonConfig<string, unknown, unknown> & { resultSchema?: unknown }, fn: string): readonly TriggerManifest[] | undefined {
  if (typeof config !== "object" || config === null) throw new TypeError(`${fn}: config must be an object`)
  if (typeof config.id !== "string" || config.id.trim() === "") throw new TypeError(`${fn}: id must be a non-blank string`)
  if (!idPattern.test(config.id)) throw new TypeError(`${fn}: id ${JSON.stringify(config.id)} must match ${idPattern}`)
  const at = `${fn} ${JSON.stringify(config.id)}`
  if (!isTemplate(config.template)) throw new TypeError(`${at}: template must be a template() definition`)
  if (config.init !== undefined && typeof config.init !== "function") throw new TypeError(`${at}: init must be a function`)
  if (config.inputSchema !== undefined && !isStandardSchema(config.inputSchema)) throw new TypeError(`${at}: inputSchema must be a Standard Schema v1 validator`)
  if (config.resultSchema !== undefined && !isStandardSchema(config.resultSchema)) throw new TypeError(`${at}: resultSchema must be a Standard Schema v1 validator`)
  if (config.closeAfterIdle !== undefined) checkRetention(config.closeAfterIdle, `${at}: closeAfterIdle`)
  if (config.hibernateAfterIdle !== undefined) checkRetention(config.hibernateAfterIdle, `${at}: hibernateAfterIdle`)
  for (const k of ["maxTurnDuration", "idleTimeout"] as const) {
    const v = config[k]
    if (v === undefined) continue
    let ms: number
    try {
      ms = parseDuration(v)
    } catch (e) {
      throw new TypeError(`${at}: ${k}: ${(e as Error).message}`)
    }
    if (k === "idleTimeout" && (ms < 1 || ms > 3_600_000)) throw new TypeError(`${at}: idleTimeout ${v} is out of range: it must be from 1ms to 1h`)
  }
  if (config.runtimeMcp !== undefined) {
    try {
      checkPolicy(config.runtimeMcp)
    } catch (e) {
      throw new TypeError(`${at}: runtimeMcp: ${(e as Error).message}`)
    }
  }
  if (config.triggers !== undefined) return checkTriggers(config.triggers, config.inputSchema as StandardSchemaV1 | undefined, at)
  return undefined
}

function define(config: CommonConfig<string, unknown, unknown> & { resultSchema?: StandardSchemaV1; turn?: unknown; run?: unknown }, actor: boolean, triggers: readonly TriggerManifest[] | undefined): AgentDefinition {
  const d: Record<string, unknown> = {
    kind: "agent",
    id: config.id,
    template: config.template,
    closeAfterIdle: config.closeAfterIdle ?? "7d",
    hibernateAfterIdle: config.hibernateAfterIdle ?? "never",
    actor,
  }
  for (const k of ["runtimeMcp", "inputSchema", "resultSchema", "maxTurnDuration", "idleTimeout", "init", "turn", "run"] as const) {
    if (config[k] !== undefined) d[k] = k === "runtimeMcp" ? structuredClone(config[k]) : config[k]
  }
  if (triggers !== undefined) d.triggers = triggers
  Object.defineProperty(d, agentBrand, { value: true })
  return Object.freeze(d) as unknown as AgentDefinition
}

/**
 * Defines an Agent. Infers its ID, init state, validated input and result.
 * Throws TypeError when `id` is blank or malformed, `template` is not a
 * template() definition, `turn` is not a function, or a trigger is
 * malformed, declared twice or has an input the Agent refuses.
 */
export function agent<const Id extends string, S = undefined, IS extends StandardSchemaV1 | undefined = undefined, RS extends StandardSchemaV1 | undefined = undefined, R = unknown>(
  config: AgentConfig<Id, S, IS, RS, R>,
): AgentDefinition<Id, ClientInputOf<IS>, ResultOf<RS, R>, S> {
  const trs = check(config as never, "agent")
  if (typeof config.turn !== "function") throw new TypeError(`agent ${JSON.stringify(config.id)}: turn must be a function`)
  return define(config as never, false, trs) as AgentDefinition<Id, ClientInputOf<IS>, ResultOf<RS, R>, S>
}

/**
 * Defines an Actor: an Agent whose one `run(session, ctx)` loop receives the
 * Session's Turns with `session.receive()`. Same checks as agent(), with
 * `run` in place of `turn`.
 */
export function actor<const Id extends string, S = undefined, IS extends StandardSchemaV1 | undefined = undefined, RS extends StandardSchemaV1 | undefined = undefined>(
  config: ActorConfig<Id, S, IS, RS>,
): AgentDefinition<Id, ClientInputOf<IS>, RS extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<RS> : JsonValue | null, S> {
  const trs = check(config as never, "actor")
  if (typeof config.run !== "function") throw new TypeError(`actor ${JSON.stringify(config.id)}: run must be a function`)
  return define(config as never, true, trs) as never
}

/** Reports whether v is an agent() or actor() definition (also from another copy of the SDK). */
export function isAgentDefinition(v: unknown): v is AgentDefinition {
  return typeof v === "object" && v !== null && (v as Record<symbol, unknown>)[agentBrand] === true && (v as AgentDefinition).kind === "agent"
}
