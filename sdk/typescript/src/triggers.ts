/**
 * Triggers: `triggers.cron(name, pattern, { timezone, input })` starts work
 * for an Agent on its own. Each occurrence of the pattern admits a fresh
 * Session (and Computer) whose first Turn has `input` and source
 * `{ kind: "schedule" }`. Give an Agent its triggers in
 * `agent({ triggers: [...] })` (helmr.Cron in the Go SDK, trigger.go).
 */
import type { StandardSchemaV1 } from "@standard-schema/spec"
import { byteLength, encodeJSON, limits, parseInputContent } from "./content.js"
import type { InputContent, JsonValue } from "./content.js"
import { formatIssues } from "./schema.js"

/** What a fire does while the previous fire's Session still has queued or running Turns. */
export type TriggerOverlap = "skip" | "allow"

/** The options of `triggers.cron`. */
export interface CronOptions<I = InputContent> {
  /** The IANA time zone the pattern is read in. Default `"UTC"`. */
  readonly timezone?: string
  /**
   * Each fire's initial Turn input: the Agent's client input (InputContent
   * for a text Agent). Default `[]` for a text Agent, `null` for a schema one.
   */
  readonly input?: I
  /**
   * Helmr extension. `"skip"` (default): a fire while the previous fire's
   * Session still has queued or running Turns admits nothing and counts as
   * missed. `"allow"`: every fire admits its Session.
   */
  readonly overlap?: TriggerOverlap
}

/** A cron trigger, as `triggers.cron` returns it. `I` is the input type it was given. */
export interface CronTrigger<I = unknown> {
  readonly kind: "cron"
  readonly name: string
  readonly pattern: string
  readonly timezone: string
  readonly overlap: TriggerOverlap
  /** The input as given (undefined when omitted); the Agent resolves the default. */
  readonly input: I | undefined
}

/** Every kind of trigger (only cron so far). */
export type Trigger<I = unknown> = CronTrigger<I>

/** A trigger's entry in an Agent's manifest (helmrtype.TriggerManifest). */
export interface TriggerManifest {
  readonly name: string
  readonly kind: "cron"
  readonly pattern: string
  readonly timezone: string
  readonly input: JsonValue
  readonly overlap: TriggerOverlap
}

const namePattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/
const triggerBrand = Symbol.for("helmr.sdk.Trigger")
// The descriptors robfig/cron/v3 reads (the server's parser), besides "@every <duration>".
const descriptors = new Set(["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"])
const goDuration = /^(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))*$/
const field = /^[0-9A-Za-z*?,/-]+$/

/** Why pattern is not a cron pattern the server reads, or undefined when it looks like one. */
function patternProblem(pattern: string): string | undefined {
  if (pattern.trim() === "") return "the pattern is empty"
  if (/^(CRON_)?TZ=/.test(pattern.trimStart())) return "give the time zone in the timezone option, not in the pattern"
  if (pattern.startsWith("@")) {
    if (descriptors.has(pattern)) return undefined
    if (pattern.startsWith("@every ") && goDuration.test(pattern.slice("@every ".length))) return undefined
    return `unknown descriptor: want ${[...descriptors].join(", ")} or "@every <duration>"`
  }
  const fields = pattern.trim().split(/\s+/)
  if (fields.length !== 5 && fields.length !== 6) {
    return `it has ${fields.length} field${fields.length === 1 ? "" : "s"}: want five (minute hour day-of-month month day-of-week), six with a leading seconds field, or a descriptor such as @daily`
  }
  const bad = fields.find((f) => !field.test(f))
  if (bad !== undefined) return `field ${JSON.stringify(bad)} is not a cron field`
  return undefined
}

/** Why tz is not an IANA time zone name, or undefined when Intl knows it. */
function timezoneProblem(tz: string): string | undefined {
  if (tz === "") return "the time zone is empty"
  if (/^[+-]/.test(tz)) return "want an IANA time zone name (Europe/Paris, UTC), not an offset"
  let resolved: string
  try {
    resolved = new Intl.DateTimeFormat("en-US", { timeZone: tz }).resolvedOptions().timeZone
  } catch {
    return "not an IANA time zone (Intl.DateTimeFormat does not know it)"
  }
  // Intl reads names in any case; the server (Go's time.LoadLocation) does not.
  if (resolved !== tz && resolved.toLowerCase() === tz.toLowerCase()) return `write it ${JSON.stringify(resolved)}`
  return undefined
}

/**
 * Returns a cron trigger named `name` (`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
 * that fires at each occurrence of `pattern`: five fields (minute, hour, day
 * of month, month, day of week), six with a leading seconds field, or a
 * descriptor (@yearly, @monthly, @weekly, @daily, @hourly), read in
 * `options.timezone` (default UTC). Throws TypeError on a bad name, pattern,
 * time zone, overlap or a non-JSON input; the Agent checks the input against
 * its input contract.
 */
function cron<const I = never>(name: string, pattern: string, options: CronOptions<I> = {}): CronTrigger<I> {
  if (typeof name !== "string" || !namePattern.test(name)) throw new TypeError(`triggers.cron: name ${JSON.stringify(name)} must match ${namePattern}`)
  const at = `triggers.cron ${JSON.stringify(name)}`
  if (typeof pattern !== "string") throw new TypeError(`${at}: pattern must be a string, not ${pattern === null ? "null" : typeof pattern}`)
  const pp = patternProblem(pattern)
  if (pp !== undefined) throw new TypeError(`${at}: cron pattern ${JSON.stringify(pattern)}: ${pp}`)
  if (typeof options !== "object" || options === null || Array.isArray(options)) throw new TypeError(`${at}: options must be an object`)
  const timezone = options.timezone ?? "UTC"
  if (typeof timezone !== "string") throw new TypeError(`${at}: timezone must be a string, not ${typeof timezone}`)
  const tp = timezoneProblem(timezone)
  if (tp !== undefined) throw new TypeError(`${at}: time zone ${JSON.stringify(timezone)}: ${tp}`)
  const overlap = options.overlap ?? "skip"
  if (overlap !== "skip" && overlap !== "allow") throw new TypeError(`${at}: overlap ${JSON.stringify(overlap)}: want "skip" or "allow"`)
  let input: I | undefined
  if (options.input !== undefined) {
    let encoded: string
    try {
      encoded = encodeJSON(options.input, "input", "input_invalid")
    } catch (e) {
      throw new TypeError(`${at}: ${(e as Error).message}`)
    }
    // A copy: later changes to the caller's object do not change the trigger.
    input = deepFreeze(JSON.parse(encoded)) as I
  }
  const t = { kind: "cron" as const, name, pattern, timezone, overlap, input }
  Object.defineProperty(t, triggerBrand, { value: true })
  return Object.freeze(t)
}

/** Triggers that start Sessions of an Agent on their own. */
export const triggers = Object.freeze({ cron })

/** Reports whether v is a trigger made by `triggers.cron` (also from another copy of the SDK). */
export function isTrigger(v: unknown): v is Trigger {
  return typeof v === "object" && v !== null && (v as Record<symbol, unknown>)[triggerBrand] === true && (v as Trigger).kind === "cron"
}

function deepFreeze<T>(v: T): T {
  if (typeof v === "object" && v !== null) {
    for (const e of Object.values(v)) deepFreeze(e)
    Object.freeze(v)
  }
  return v
}

/**
 * Checks an Agent's triggers (`at` names the Agent in errors): each a
 * trigger, names unique, each input valid for the Agent: InputContent for a
 * text Agent (default `[]`), else passing `inputSchema` when it validates
 * synchronously. An async validator is not awaited: the server checks that
 * the input is JSON when the Deployment is published, and each fire's Turn
 * validates it (input_invalid). Returns their manifest entries.
 */
export function checkTriggers(list: unknown, inputSchema: StandardSchemaV1 | undefined, at: string): readonly TriggerManifest[] {
  if (!Array.isArray(list)) throw new TypeError(`${at}: triggers must be an array of triggers.cron(...)`)
  const seen = new Set<string>()
  const out: TriggerManifest[] = []
  list.forEach((t: unknown, i: number) => {
    if (!isTrigger(t)) throw new TypeError(`${at}: triggers[${i}] must be a triggers.cron(...) trigger`)
    if (seen.has(t.name)) throw new TypeError(`${at}: trigger ${JSON.stringify(t.name)} is declared twice`)
    seen.add(t.name)
    const tat = `${at}: trigger ${JSON.stringify(t.name)}`
    let input: JsonValue
    if (inputSchema === undefined) {
      try {
        input = parseInputContent(t.input === undefined ? [] : t.input) as unknown as JsonValue
      } catch (e) {
        throw new TypeError(`${tat}: a text Agent's input is InputContent ([{ type: "text", text }]): ${(e as Error).message}`)
      }
    } else {
      input = (t.input === undefined ? null : t.input) as JsonValue
      let r: StandardSchemaV1.Result<unknown> | Promise<StandardSchemaV1.Result<unknown>>
      try {
        r = inputSchema["~standard"].validate(input)
      } catch (e) {
        throw new TypeError(`${tat}: the inputSchema threw on the input: ${(e as Error).message}`)
      }
      if (typeof (r as { then?: unknown }).then === "function") {
        // An async validator: each fire's Turn validates the input.
        Promise.resolve(r).catch(() => {})
      } else if ((r as StandardSchemaV1.Result<unknown>).issues) {
        throw new TypeError(`${tat}: input does not match the Agent's inputSchema: ${formatIssues((r as StandardSchemaV1.FailureResult).issues)}`)
      }
    }
    const n = byteLength(JSON.stringify(input))
    if (n > limits.maxInputBytes) throw new TypeError(`${tat}: input is ${n} bytes of JSON; the limit is ${limits.maxInputBytes}`)
    out.push(Object.freeze({ name: t.name, kind: "cron" as const, pattern: t.pattern, timezone: t.timezone, input, overlap: t.overlap }))
  })
  return Object.freeze(out)
}
