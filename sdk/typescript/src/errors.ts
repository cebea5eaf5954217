/**
 * Errors with the stable codes of the Helmr API and session protocol
 * (helmrtype/errors.go). Match on `code`, never on `message`.
 */

/** The stable error codes. */
export type ErrorCode =
  | "not_found" | "invalid_request" | "input_invalid" | "result_invalid" | "output_invalid"
  | "limit_exceeded" | "response_already_staged" | "idempotency_conflict" | "conflict"
  | "session_key_conflict" | "session_closed" | "turn_not_running" | "turn_settled"
  | "unauthorized" | "forbidden" | "no_deployment" | "handler_failed" | "process_exited"
  | "execution_lost" | "interrupted" | "deadline_exceeded" | "callback_failed"
  | "message_rejected" | "cleanup_failed" | "cancelled" | "storage_pressure" | "unavailable"
  | "internal" | "answer_invalid" | "policy_invalid" | "sources_invalid" | "image_build_failed" | "ask_not_pending"
  | "token_cancelled" | "token_completion_conflict" | "token_expired" | "wait_cancelled"
  | "wait_timeout"

/** The error object of the REST API and the protocol: `{code, message?, details?}`. */
export interface ErrorBody {
  readonly code: string
  readonly message?: string
  readonly details?: Record<string, unknown>
}

const helmrErrorBrand = Symbol.for("helmr.sdk.HelmrError")

/** An error carrying a stable Helmr code. Agent code may throw one to fail a Turn with that code. */
export class HelmrError extends Error {
  readonly code: string
  readonly details?: Record<string, unknown>
  constructor(code: string, message?: string, details?: Record<string, unknown>) {
    super(message ? `${code}: ${message}` : code)
    this.name = "HelmrError"
    this.code = code
    if (details !== undefined) this.details = details
    Object.defineProperty(this, helmrErrorBrand, { value: true })
  }
  /** The message without the code prefix. */
  get detail(): string {
    const p = this.code + ": "
    return this.message.startsWith(p) ? this.message.slice(p.length) : this.message === this.code ? "" : this.message
  }
  /** The protocol/REST error body of this error. */
  toBody(): ErrorBody {
    const b: { code: string; message?: string; details?: Record<string, unknown> } = { code: this.code }
    if (this.detail) b.message = this.detail
    if (this.details) b.details = this.details
    return b
  }
  /** By brand, so that it works across copies of the SDK; a subclass without its own check tests its prototype chain. */
  static [Symbol.hasInstance](v: unknown): boolean {
    if (this !== HelmrError) return Function.prototype[Symbol.hasInstance].call(this, v)
    return typeof v === "object" && v !== null && (v as Record<symbol, unknown>)[helmrErrorBrand] === true
  }
  /** Builds an error from a protocol or REST error body. */
  static from(body: ErrorBody | undefined | null, fallback = "internal"): HelmrError {
    if (!body || typeof body.code !== "string") return new HelmrError(fallback)
    return new HelmrError(body.code, body.message, body.details)
  }
}

/** Converts anything thrown into a protocol error body, using `fallback` when it has no code. */
export function errorBody(err: unknown, fallback: string): ErrorBody {
  if (err instanceof HelmrError) return err.toBody()
  if (err instanceof Error) return { code: fallback, message: err.message || String(err) }
  return { code: fallback, message: String(err) }
}

/** Reports the Helmr code of err, or undefined. */
export function codeOf(err: unknown): string | undefined {
  return err instanceof HelmrError ? err.code : undefined
}
