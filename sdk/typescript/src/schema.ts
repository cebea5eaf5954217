/** Standard Schema v1 validation and JSON Schema discovery. */
import type { StandardSchemaV1 } from "@standard-schema/spec"
import { HelmrError } from "./errors.js"

export type { StandardSchemaV1 }

/** Reports whether v is a Standard Schema v1 validator. */
export function isStandardSchema(v: unknown): v is StandardSchemaV1 {
  const s = (v as { "~standard"?: { version?: unknown; validate?: unknown } } | null)?.["~standard"]
  return (typeof v === "object" || typeof v === "function") && v !== null && typeof s === "object" && s !== null &&
    s.version === 1 && typeof s.validate === "function"
}

/** Formats Standard Schema issues as one message. */
export function formatIssues(issues: readonly StandardSchemaV1.Issue[]): string {
  return issues.map((i) => {
    const path = (i.path ?? []).map((p) => (typeof p === "object" && p !== null ? (p as StandardSchemaV1.PathSegment).key : p))
    return path.length ? `${path.map(String).join(".")}: ${i.message}` : i.message
  }).join("; ")
}

/** Validates value with schema (awaiting async validators); throws HelmrError(code) on issues. */
export async function validate<S extends StandardSchemaV1>(schema: S, value: unknown, code: string, what: string): Promise<StandardSchemaV1.InferOutput<S>> {
  let r = schema["~standard"].validate(value)
  if (r instanceof Promise) r = await r
  if (r.issues) throw new HelmrError(code, `${what} does not validate: ${formatIssues(r.issues)}`, { issues: r.issues.map((i) => ({ message: i.message, path: i.path?.map((p) => (typeof p === "object" && p !== null ? String((p as StandardSchemaV1.PathSegment).key) : String(p))) })) })
  return r.value as StandardSchemaV1.InferOutput<S>
}

/**
 * The JSON Schema of a validator, for discovery: from the Standard JSON
 * Schema extension (`~standard.jsonSchema`), else a `toJSONSchema()` method
 * (zod 4), else `{"unavailable": reason}` as the Go SDK writes.
 */
export function jsonSchemaOf(schema: StandardSchemaV1, side: "input" | "output"): Record<string, unknown> {
  const std = schema["~standard"] as StandardSchemaV1.Props & { jsonSchema?: { input?: Function; output?: Function } }
  const reasons: string[] = []
  const conv = std.jsonSchema?.[side]
  if (typeof conv === "function") {
    try {
      return clean(conv.call(std.jsonSchema, { target: "draft-2020-12" }))
    } catch (e) {
      reasons.push(`the ${std.vendor} validator's JSON Schema conversion failed: ${(e as Error).message}`)
    }
  }
  const to = (schema as { toJSONSchema?: unknown }).toJSONSchema
  if (typeof to === "function" && reasons.length === 0) {
    try {
      return clean(to.call(schema, { io: side }))
    } catch (e) {
      reasons.push(`the ${std.vendor} validator's toJSONSchema failed: ${(e as Error).message}`)
    }
  }
  if (reasons.length === 0) reasons.push(`the ${std.vendor} validator has no JSON Schema form`)
  return { unavailable: reasons.join("; ") }
}

function clean(s: unknown): Record<string, unknown> {
  if (typeof s !== "object" || s === null || Array.isArray(s)) throw new Error("the conversion did not return an object")
  return JSON.parse(JSON.stringify(s))
}
