/**
 * Content: what Turns read and write. The rules and limits of
 * helmrtype/content.go, checked before anything is sent, with the same codes.
 */
import { HelmrError } from "./errors.js"

/** JSON values. */
export type JsonPrimitive = string | number | boolean | null
export type JsonValue = JsonPrimitive | readonly JsonValue[] | { readonly [key: string]: JsonValue }

export interface TextPart { readonly type: "text"; readonly text: string }
export interface JsonPart { readonly type: "json"; readonly value: JsonValue }
export type ContentPart = TextPart | JsonPart
/** Output and response Content: text and JSON parts. */
export type Content = readonly ContentPart[]
/** Input Content: text parts only. */
export type InputContent = readonly TextPart[]
/** Content or its string shorthand (one text part). */
export type HumanContent = Content | string

export const limits = Object.freeze({
  maxContentBytes: 256 << 10,
  maxContentParts: 64,
  maxTurnOutputBytes: 8 << 20,
  maxResponseBytes: 256 << 10,
  maxResultBytes: 1 << 20,
  maxInputBytes: 256 << 10,
})

/** The UTF-8 length of a string. */
export function byteLength(s: string): number {
  return Buffer.byteLength(s, "utf8")
}

/**
 * Encodes v as JSON, refusing what is not finite JSON (NaN, Infinity,
 * undefined, functions, symbols, bigint, cycles). `what` names it in errors.
 */
export function encodeJSON(v: unknown, what: string, code: string): string {
  const seen = new Set<object>()
  const check = (x: unknown, path: string): void => {
    switch (typeof x) {
      case "string": case "boolean": return
      case "number":
        if (!Number.isFinite(x)) throw new HelmrError(code, `${what}${path}: ${x} is not a finite number`)
        return
      case "object":
        if (x === null) return
        if (seen.has(x)) throw new HelmrError(code, `${what}${path}: a cycle is not JSON`)
        if (typeof (x as { toJSON?: unknown }).toJSON === "function") {
          check((x as { toJSON(): unknown }).toJSON(), path)
          return
        }
        seen.add(x)
        if (Array.isArray(x)) x.forEach((e, i) => check(e, `${path}[${i}]`))
        else {
          const proto = Object.getPrototypeOf(x)
          if (proto !== Object.prototype && proto !== null) {
            throw new HelmrError(code, `${what}${path}: a ${proto?.constructor?.name ?? "class"} instance is not plain JSON`)
          }
          for (const [k, e] of Object.entries(x)) {
            if (e === undefined) continue
            check(e, `${path}.${k}`)
          }
        }
        seen.delete(x)
        return
      default:
        throw new HelmrError(code, `${what}${path}: a ${typeof x} is not JSON`)
    }
  }
  check(v, "")
  return JSON.stringify(v)
}

/** Turns HumanContent into Content, checking its shape, parts and limits. */
export function toContent(v: unknown, what = "content"): Content {
  if (typeof v === "string") return [{ type: "text", text: v }]
  if (v === null || v === undefined) throw new HelmrError("output_invalid", `${what} is ${v}; use "" or []`)
  if (!Array.isArray(v)) throw new HelmrError("output_invalid", `${what} must be a string or an array of parts, not ${typeof v}`)
  if (v.length > limits.maxContentParts) {
    throw new HelmrError("limit_exceeded", `${what} has ${v.length} parts; the limit is ${limits.maxContentParts}`)
  }
  const out: ContentPart[] = []
  v.forEach((p: unknown, i: number) => {
    if (typeof p !== "object" || p === null) throw new HelmrError("output_invalid", `${what} part ${i}: a part is an object, not ${p === null ? "null" : typeof p}`)
    const part = p as Record<string, unknown>
    if (part.type === "text") {
      if (typeof part.text !== "string") throw new HelmrError("output_invalid", `${what} part ${i}: text must be a string`)
      out.push({ type: "text", text: part.text })
    } else if (part.type === "json") {
      encodeJSON(part.value === undefined ? null : part.value, `${what} part ${i}: value`, "output_invalid")
      out.push({ type: "json", value: (part.value === undefined ? null : part.value) as JsonValue })
    } else {
      throw new HelmrError("output_invalid", `${what} part ${i}: type must be "text" or "json", not ${JSON.stringify(part.type)}`)
    }
  })
  return out
}

/** The encoded size of Content, as the server counts it. */
export function encodedSize(c: Content): number {
  return byteLength(JSON.stringify(c))
}

/** Checks one Content value against the 256 KiB limit (or `max`). */
export function checkContentSize(c: Content, what: string, max = limits.maxContentBytes): number {
  const n = encodedSize(c)
  if (n > max) throw new HelmrError("limit_exceeded", `${what} is ${n} bytes of JSON; the limit is ${max}`)
  return n
}

/** Parses input Content (text parts only), as the Go SDK does for text Agents. */
export function parseInputContent(v: unknown): InputContent {
  if (!Array.isArray(v)) throw new HelmrError("input_invalid", `content must be an array of parts, not ${v === null ? "null" : typeof v}`)
  if (v.length > limits.maxContentParts) throw new HelmrError("input_invalid", `content has ${v.length} parts; the limit is ${limits.maxContentParts}`)
  return Object.freeze(v.map((p: unknown, i: number) => {
    const part = p as Record<string, unknown> | null
    if (!part || typeof part !== "object" || part.type !== "text" || typeof part.text !== "string" || Object.keys(part).length !== 2) {
      throw new HelmrError("input_invalid", `part ${i}: input content takes text parts {type: "text", text} only`)
    }
    return Object.freeze({ type: "text" as const, text: part.text })
  }))
}

/** Concatenates the text parts of Content. */
export function plainText(c: Content): string {
  return c.map((p) => (p.type === "text" ? p.text : "")).join("")
}
