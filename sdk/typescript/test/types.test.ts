// Type-level tests: compiled by tsc (a wrong inference fails the build); the
// runtime part only checks that the client builds its requests.
import assert from "node:assert/strict"
import { test } from "node:test"
import { z } from "zod"
import { agent, actor, template, image, HelmrClient, triggers } from "@helmr/sdk"
import type { AgentInput, AgentResult, InputContent, Turn, SessionRef, TurnRef, SessionCreateReceipt } from "@helmr/sdk"
import type * as ClientTypes from "@helmr/sdk/client"

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
const expect = <T extends true>(_: T) => {}

const host = template({ id: "host", image: image("host").fromHost() })

export const worker = agent({
  id: "worker",
  template: host,
  inputSchema: z.object({ issue: z.number() }).transform(async (v) => ({ ...v, label: String(v.issue) })),
  resultSchema: z.object({ title: z.string() }),
  async init() { return { started: 1 } },
  async turn(turn, ctx) {
    expect<Equal<typeof turn.input, { issue: number; label: string }>>(true)
    expect<Equal<typeof ctx.initResult, { started: number }>>(true)
    return { title: turn.input.label }
  },
})

export const chat = agent({
  id: "chat",
  template: host,
  async turn(turn, ctx) {
    expect<Equal<typeof turn, Turn<InputContent>>>(true)
    expect<Equal<typeof ctx.initResult, undefined>>(true)
    const a = await turn.ask({ prompt: "ok?", answer: { type: "choice", options: [{ id: "y", label: "Yes", value: true }] } })
    expect<Equal<typeof a.answer.selected[number]["id"], "y">>(true)
    const b = await turn.ask({ prompt: "why?", answer: { type: "text" } })
    expect<Equal<typeof b.answer, string>>(true)
    return { n: 1 }
  },
})

expect<Equal<AgentInput<typeof worker>, { issue: number }>>(true)
expect<Equal<AgentResult<typeof worker>, { title: string }>>(true)
expect<Equal<AgentInput<typeof chat>, InputContent>>(true)
expect<Equal<AgentResult<typeof chat>, { n: number }>>(true)

// Trigger inputs are typed as the Agent's client input.
const issueSchema = z.object({ issue: z.number() }).transform((v) => ({ ...v, label: String(v.issue) }))
export const nightly = agent({
  id: "nightly",
  template: host,
  inputSchema: issueSchema,
  triggers: [triggers.cron("nightly", "0 3 * * *", { timezone: "Europe/Paris", input: { issue: 1 } })],
  async turn(turn) { return turn.input.label },
})
export const textTicker = agent({
  id: "text-ticker",
  template: host,
  triggers: [
    triggers.cron("hourly", "@hourly", { input: [{ type: "text", text: "tick" }], overlap: "allow" }),
    triggers.cron("empty", "*/5 * * * * *"),
  ],
  async turn() { return null },
})
const standalone = triggers.cron("standalone", "@daily", { input: [{ type: "text", text: "x" }] })
export const actorTicker = actor({ id: "actor-ticker", template: host, triggers: [standalone], async run() {} })
// What the compiler refuses (also refused at run time, with TypeError).
const refused = [
  // @ts-expect-error: the input must be the Agent's client input (issue is a number)
  () => agent({ id: "a", template: host, inputSchema: issueSchema, triggers: [triggers.cron("wrong", "0 4 * * *", { input: { issue: "1" } })], turn: async () => null }),
  // @ts-expect-error: a text Agent's input is InputContent, not a string
  () => agent({ id: "a", template: host, triggers: [triggers.cron("str", "@daily", { input: "tick" })], turn: async () => null }),
  // @ts-expect-error: a text Agent's input is InputContent, not the schema Agent's input
  () => agent({ id: "a", template: host, triggers: [triggers.cron("obj", "@daily", { input: { issue: 1 } })], turn: async () => null }),
  // @ts-expect-error: overlap is "skip" or "allow"
  () => agent({ id: "a", template: host, triggers: [triggers.cron("ov", "@daily", { overlap: "queue" })], turn: async () => null }),
]

test("trigger inputs the compiler refuses are refused at run time too", () => {
  for (const f of refused) assert.throws(f, TypeError)
})

async function typedInvocation(client: HelmrClient) {
  const started = await client.sessions.create<typeof worker>({ agent: "worker", input: { issue: 42 } })
  const outcome = await started.turn.wait()
  if (outcome.status === "completed" && outcome.payloadExpiredAt === undefined) {
    expect<Equal<typeof outcome.result, { title: string }>>(true)
  }
  const timed = await started.turn.wait({ timeout: "5s" })
  if (timed.status === "settled" && timed.outcome.status === "completed") void timed.outcome.response
  // The spec's names: SessionCreateReceipt { session: SessionRef; turn: TurnRef | null }.
  const receipt: SessionCreateReceipt<typeof worker> = started
  const sref: SessionRef<typeof worker> = receipt.session
  const tref: TurnRef<typeof worker> | null = receipt.turn
  const sref2: ClientTypes.SessionRef<typeof worker> = started.session
  const tref2: ClientTypes.TurnRef<typeof worker> = started.turn
  void [sref, tref, sref2, tref2, client.sessions.ref("s") satisfies SessionRef]
  const none = await client.sessions.create<typeof worker>({ agent: "worker" })
  expect<Equal<typeof none.turn, null>>(true)
  // @ts-expect-error: the input must match the Agent's schema input
  await client.sessions.create<typeof worker>({ agent: "worker", input: { issue: "42" } })
  // @ts-expect-error: the agent id must be the definition's
  await client.sessions.create<typeof worker>({ agent: "other", input: { issue: 1 } })
  const attached = await client.sessions.attach<typeof worker>({ id: "s", agent: "worker", deploymentId: "d" })
  await attached.enqueue({ issue: 2 })
}
void typedInvocation

test("the client sends snake_case bodies with an idempotency key and maps answers to camelCase", async () => {
  const calls: Array<{ url: string; init: RequestInit }> = []
  const fake = (async (url: URL, init: RequestInit) => {
    calls.push({ url: String(url), init })
    return new Response(JSON.stringify({ session: { id: "s1", deployment_id: "d1", initial_turn: { id: "t1", status: "queued" } }, turn: { id: "t1", session_id: "s1", sequence: 1, status: "queued", input: { issue_no: 1 } } }), { status: 201 })
  }) as unknown as typeof fetch
  const c = new HelmrClient({ baseUrl: "http://x/", apiKey: "hlmr_sk_test", fetch: fake })
  const r = await c.sessions.create<typeof worker>({ agent: "worker", input: { issue: 1 }, key: "k" })
  assert.equal(r.turn.id, "t1")
  assert.equal(r.session.id, "s1")
  const body = JSON.parse(String(calls[0].init.body))
  assert.deepEqual({ ...body, idempotency_key: typeof body.idempotency_key }, { agent: "worker", input: { issue: 1 }, key: "k", idempotency_key: "string" })
  assert.equal((calls[0].init.headers as Record<string, string>).Authorization, "Bearer hlmr_sk_test")
  assert.equal(calls[0].url, "http://x/v1/sessions")
  const errc = new HelmrClient({ baseUrl: "http://x", fetch: (async () => new Response(JSON.stringify({ error: { code: "session_closed", message: "closed", details: { id: "s" } } }), { status: 409, headers: { "x-request-id": "r1" } })) as unknown as typeof fetch })
  await assert.rejects(errc.sessions.ref("s").enqueue([]), (e: unknown) => {
    const x = e as { name: string; code: string; status: number; requestId: string; details: unknown }
    return x.name === "APIError" && x.code === "session_closed" && x.status === 409 && x.requestId === "r1" && JSON.stringify(x.details) === '{"id":"s"}'
  })
})
