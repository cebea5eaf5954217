// Client behaviour against a fake fetch: what is sent and how answers are read.
import assert from "node:assert/strict"
import { test } from "node:test"
import { HelmrClient } from "@helmr/sdk"
import type { HelmrError } from "@helmr/sdk"

type Call = { url: string; init: RequestInit }

function fakeClient(answer: unknown, status = 200): { client: HelmrClient; calls: Call[] } {
  const calls: Call[] = []
  const fetch = (async (url: URL, init: RequestInit) => {
    calls.push({ url: String(url), init })
    return new Response(JSON.stringify(answer), { status })
  }) as unknown as typeof globalThis.fetch
  return { client: new HelmrClient({ baseUrl: "http://x", fetch }), calls }
}

test("asks: a question's answer spec is camelCase (allowText); option values stay as sent", async () => {
  const wire = {
    id: "a1", session_id: "s1", turn_id: "t1", status: "pending", created_at: "2026-01-01T00:00:00Z",
    question: { prompt: [{ type: "text", text: "ok?" }], answer: { type: "choice", multiple: true, allow_text: true, options: [{ id: "y", label: "Yes", value: { snake_key: 1 } }] } },
  }
  const { client } = fakeClient(wire)
  const turn = client.sessions.ref("s1").turns.ref("t1")
  const a = await turn.asks.get("a1")
  assert.equal(a.question.answer.allowText, true)
  assert.equal((a.question.answer as Record<string, unknown>).allow_text, undefined)
  assert.deepEqual(a.question.answer.options?.[0].value, { snake_key: 1 })
  const { client: c2 } = fakeClient({ asks: [wire] })
  const page = await c2.sessions.ref("s1").turns.ref("t1").asks.list()
  assert.equal(page.items[0].question.answer.allowText, true)
})
