// The client retries an idempotent request answered 503 with Retry-After (the control plane's answer while
// its database is unreachable), and nothing else.
import assert from "node:assert/strict"
import { test } from "node:test"
import { HelmrClient, APIError } from "@helmr/sdk"

type Call = { url: string; method: string; body?: string }

const unavailable = { error: { code: "unavailable", message: "the database is unreachable; try again" } }

/** A fake server: the first `down` requests are answered 503 (with Retry-After when given), then `ok`. */
function outage(down: number, ok: unknown, opts: { retryAfter?: string; status?: number; attempts?: number } = {}) {
  const calls: Call[] = []
  const fetch = (async (url: URL, init: RequestInit) => {
    calls.push({ url: String(url), method: String(init.method), body: init.body === undefined ? undefined : String(init.body) })
    if (calls.length <= down) {
      const headers: Record<string, string> = { "content-type": "application/json" }
      if (opts.retryAfter !== undefined) headers["retry-after"] = opts.retryAfter
      return new Response(JSON.stringify(unavailable), { status: 503, headers })
    }
    return new Response(JSON.stringify(ok), { status: opts.status ?? 200 })
  }) as unknown as typeof globalThis.fetch
  // Retry-After is 1 s; the policy caps each wait at 10 ms.
  const client = new HelmrClient({ baseUrl: "http://x", fetch, retry: { maxDelayMs: 10, attempts: opts.attempts ?? 5 } })
  return { client, calls }
}

test("a GET answered 503 with Retry-After is retried until it succeeds", async () => {
  const { client, calls } = outage(2, { id: "s1", agent: "a" }, { retryAfter: "1" })
  const s = await client.sessions.get("s1")
  assert.equal(s.id, "s1")
  assert.equal(calls.length, 3)
})

test("a POST with an idempotency_key is retried with the same body", async () => {
  const { client, calls } = outage(1, { id: "t1", session_id: "s1", status: "queued" }, { retryAfter: "1", status: 201 })
  await client.sessions.ref("s1").enqueue("hi")
  assert.equal(calls.length, 2)
  assert.equal(calls[0].body, calls[1].body)
  assert.match(String(calls[0].body), /"idempotency_key":"/)
})

test("a POST without an idempotency_key, or a 503 without Retry-After, is not retried", async () => {
  const a = outage(1, {}, { retryAfter: "1" })
  await assert.rejects(a.client.tokens.complete("tok1", { data: { ok: true } }), (e: unknown) =>
    e instanceof APIError && e.status === 503 && e.code === "unavailable" && e.retryAfterMs === 1000)
  assert.equal(a.calls.length, 1)
  const b = outage(1, { id: "s1" })
  await assert.rejects(b.client.sessions.get("s1"), (e: unknown) => e instanceof APIError && e.status === 503 && e.retryAfterMs === undefined)
  assert.equal(b.calls.length, 1)
})

test("retries are bounded by attempts, and the signal ends the wait", async () => {
  const a = outage(1000, {}, { retryAfter: "1", attempts: 4 })
  await assert.rejects(a.client.sessions.get("s1"), (e: unknown) => e instanceof APIError && e.code === "unavailable")
  assert.equal(a.calls.length, 4)

  const calls: Call[] = []
  const fetch = (async (url: URL, init: RequestInit) => {
    calls.push({ url: String(url), method: String(init.method) })
    return new Response(JSON.stringify(unavailable), { status: 503, headers: { "retry-after": "30" } })
  }) as unknown as typeof globalThis.fetch
  const client = new HelmrClient({ baseUrl: "http://x", fetch, retry: { maxDelayMs: 60_000 } })
  const started = Date.now()
  await assert.rejects(client.sessions.get("s1", { signal: AbortSignal.timeout(100) }), (e: unknown) => e instanceof APIError && e.code === "unavailable")
  assert.ok(Date.now() - started < 5000, "the signal did not end the 30 s wait")
  assert.equal(calls.length, 1)
})

test("Retry-After as an HTTP date", async () => {
  const when = new Date(Date.now() + 5000).toUTCString()
  const { client } = outage(1, {}, { retryAfter: when })
  await assert.rejects(client.tokens.complete("tok1"), (e: unknown) =>
    e instanceof APIError && e.retryAfterMs !== undefined && e.retryAfterMs > 3000 && e.retryAfterMs <= 5000)
})
