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

test("input must be finite JSON: create, enqueue and send refuse NaN, Infinity and bigint with input_invalid, sending nothing", async () => {
  const { client, calls } = fakeClient({})
  const code = async (p: Promise<unknown>) => { try { await p; return "none" } catch (e) { return (e as HelmrError).code } }
  assert.equal(await code(client.sessions.create({ agent: "w", input: { n: NaN } as never })), "input_invalid")
  assert.equal(await code(client.sessions.ref("s").enqueue({ n: Infinity } as never)), "input_invalid")
  assert.equal(await code(client.sessions.ref("s").enqueue({ n: 1n } as never)), "input_invalid")
  assert.equal(await code(client.sessions.ref("s").turns.ref("t").send([{ type: "json", value: NaN }] as never)), "input_invalid")
  assert.equal(calls.length, 0)
})

test("live message input is InputContent: no string shorthand (the spec's content rules)", async () => {
  const { client, calls } = fakeClient({ id: "m1", status: "accepted" })
  const turn = client.sessions.ref("s").turns.ref("t")
  await turn.send([{ type: "text", text: "hi" }])
  assert.deepEqual(JSON.parse(String(calls[0].init.body)).content, [{ type: "text", text: "hi" }])
  const typeOnly = () => {
    // @ts-expect-error: a message is InputContent, not a string
    void turn.send("hi")
  }
  void typeOnly
})

test("attach checks the Session's actual Agent and Deployment: deploymentId is required", async () => {
  const session = { id: "s1", agent: "worker", deployment_id: "d1", root_session_id: "s1", status: "open", holds: [] }
  const { client } = fakeClient(session)
  const ok = await client.sessions.attach({ id: "s1", agent: "worker", deploymentId: "d1" })
  assert.equal(ok.id, "s1")
  await assert.rejects(client.sessions.attach({ id: "s1", agent: "worker", deploymentId: "d2" }), (e: unknown) => (e as HelmrError).code === "conflict")
  await assert.rejects(client.sessions.attach({ id: "s1", agent: "other", deploymentId: "d1" }), (e: unknown) => (e as HelmrError).code === "conflict")
  // @ts-expect-error: the Deployment identity is part of the check
  await assert.rejects(client.sessions.attach({ id: "s1", agent: "worker" }), TypeError)
})

test("instanceof APIError holds for API answers only, not for every HelmrError", async () => {
  const { APIError, HelmrError: HE } = await import("@helmr/sdk")
  const api = new APIError(409, "conflict", "taken")
  assert.ok(api instanceof APIError)
  assert.ok(api instanceof HE)
  assert.ok(!(new HE("conflict") instanceof APIError))
  const { client } = fakeClient({ error: { code: "not_found", message: "no" } }, 404)
  await assert.rejects(client.sessions.get("s"), (e: unknown) => e instanceof APIError && (e as InstanceType<typeof APIError>).status === 404)
  await assert.rejects(client.sessions.create({ agent: "w", input: { n: NaN } as never }), (e: unknown) => e instanceof HE && !(e instanceof APIError))
})

test("wait({ timeout: 0 }) still asks once: a settled Turn is settled, not a timeout", async () => {
  const settled = { status: "settled", outcome: { status: "completed", result: { ok: true } } }
  const { client, calls } = fakeClient(settled)
  const turn = client.sessions.ref("s").turns.ref("t")
  const r = await turn.wait({ timeout: 0 })
  assert.deepEqual(r, { status: "settled", outcome: { status: "completed", result: { ok: true } } })
  assert.match(calls[0].url, /timeout=0ms/)
  assert.equal((await turn.wait({ timeout: "0s" })).status, "settled")
  const { client: c2 } = fakeClient({ status: "timeout" })
  assert.deepEqual(await c2.sessions.ref("s").turns.ref("t").wait({ timeout: 0 }), { status: "timeout" })
})

test("argument errors of Promise-returning methods reject instead of throwing", async () => {
  const { client, calls } = fakeClient({})
  const s = client.sessions.ref("s")
  let threw = false
  let p: Promise<unknown> | undefined
  try { p = s.resume({} as never) } catch { threw = true }
  assert.equal(threw, false, "resume without holdId rejects")
  await assert.rejects(p!, TypeError)
  await assert.rejects(s.turns.ref("t").asks.respond("a", {} as never), TypeError)
  assert.equal(calls.length, 0)
})

test("sessions.create: slack.channelId is sent as slack.channel_id and slack_channel_id reads back as slackChannelId", async () => {
  const session = { id: "s1", deployment_id: "d", root_session_id: "s1", agent: "w", template: "t", computer_id: null, parent_session_id: null,
    requester_session_id: null, slack_channel_id: "C0123456789", status: "open", close_after_idle: "never", hibernate_after_idle: "15m",
    idle_since: null, initial_turn: null, holds: [], created_at: "2026-01-01T00:00:00Z" }
  const { client, calls } = fakeClient({ session, turn: null }, 201)
  await client.sessions.create({ agent: "w", slack: { channelId: "C0123456789" } })
  const body = JSON.parse(String(calls[0].init.body))
  assert.deepEqual(body.slack, { channel_id: "C0123456789" })
  assert.equal(body.slack_channel_id, undefined)
  const { client: c2 } = fakeClient(session)
  assert.equal((await c2.sessions.get("s1")).slackChannelId, "C0123456789")
})
