// End to end: the fixture package bundled, published and run by a real
// control plane (HELMR_BIN), through the REST API with HelmrClient.
// Skipped when HELMR_BIN is unset. By default it runs `helmr dev DIR`, as a
// user's tests do; HELMR_TEST_MODE=server publishes the bundle to `helmr
// server` instead (POST /v1/deployments).
import assert from "node:assert/strict"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import { after, before, describe, test } from "node:test"
import { promisify } from "node:util"
import { startHelmr } from "@helmr/sdk/testing"
import type { Helmr } from "@helmr/sdk/testing"
import type { SessionEvent } from "@helmr/sdk"
import type { worker } from "./fixtures/pkg/agents/basic.js"
import { fixture, cronFixture, linkFixture, logTail, FakeServer, text, turnStart, root } from "./helpers.js"
import { bundle } from "@helmr/sdk/testing"
import * as path from "node:path"
import * as os from "node:os"

import { spawnSync } from "node:child_process"
// HELMR_BIN, else helmr on PATH; without either the end-to-end suite is skipped.
const bin = process.env.HELMR_BIN || (spawnSync("helmr", ["--help"]).status === 0 ? "helmr" : undefined)
const run = promisify(execFile)

describe("end to end", { skip: bin ? false : "no helmr binary: set HELMR_BIN (go build -o /tmp/helmr ./cmd/helmr)" }, () => {
  let h: Helmr
  before(async () => {
    linkFixture()
    h = await startHelmr({ dir: fixture, bin, mode: (process.env.HELMR_TEST_MODE as "dev" | "server") ?? "dev" })
  })
  after(async () => { await h?.close() })

  const textOf = (evs: readonly SessionEvent[]) => evs.filter((e) => e.kind === "turn.output").map((e) => ((e.data.content as Array<{ text?: string }>)[0]?.text ?? "")).join("|")

  test("the Deployment lists every exported agent; agents.get shows input kinds and schemas", async () => {
    assert.deepEqual([...h.deployment.agents].sort(), ["asker", "brittle", "counter", "echo", "failer", "fetcher", "keeper", "messenger", "parker", "planner", "sleeper", "stubborn", "tokener", "worker"])
    assert.equal((h.deployment.manifest as { sdk: string }).sdk, "typescript")
    const w = await h.client.agents.get("worker")
    assert.equal(w.inputKind, "json")
    assert.equal((w.inputSchema as { type: string }).type, "object")
    const page = await h.client.agents.list({ limit: 100 })
    assert.equal(page.items.length, 14)
  })

  test("typed invocation: create<typeof worker>, turn.wait(), a zod async transform; input_invalid and result_invalid", async () => {
    const started = await h.client.sessions.create<typeof worker>({ agent: "worker", input: { issue: 42 } })
    const outcome = await started.turn.wait()
    assert.equal(outcome.status, "completed")
    if (outcome.status === "completed" && outcome.payloadExpiredAt === undefined) {
      assert.deepEqual(outcome.result, { issue: 42, doubled: 84, title: "Issue 42" })
    }
    const bad = await started.session.enqueue({ issue: 1.5 })
    const o2 = await bad.wait()
    assert.deepEqual([o2.status, o2.error?.code], ["failed", "input_invalid"])
    const inv = await started.session.enqueue({ issue: 13 })
    assert.deepEqual([(await inv.wait()).status, (await inv.get()).error?.code], ["failed", "result_invalid"])
    const none = await h.client.sessions.create({ agent: "worker" })
    assert.equal(none.turn, null)
    const timed = await started.session.turns.ref(inv.id).wait({ timeout: "1s" })
    assert.equal(timed.status, "settled")
  })

  test("text Turn: output, pipe, respond once, events list and stream with Last-Event-ID", async () => {
    const { session, turn } = await h.client.sessions.create({ agent: "echo", input: [{ type: "text", text: "hi" }] })
    const o = await turn.wait()
    assert.equal(o.status, "completed")
    assert.deepEqual(o.response, text("hi"))
    const r = o.result as Record<string, unknown>
    assert.equal(r.second, "response_already_staged")
    assert.equal(r.source, "api_key")
    const page = await session.events.list()
    assert.equal(textOf(page.records), "echo: hi|a||piped")
    assert.equal(page.hasMore, false)
    const ac = new AbortController()
    const seen: SessionEvent[] = []
    for await (const ev of session.events.stream({ after: 2 }, { signal: ac.signal })) {
      seen.push(ev)
      if (ev.kind === "turn.completed") ac.abort()
    }
    assert.equal(seen[0].sequence, 3)
    assert.equal(seen.at(-1)!.kind, "turn.completed")
    const turns = await session.turns.list()
    assert.equal(turns.items.length, 1)
  })

  test("onMessage with MessageRejected: the Turn goes on, the timeline records message.rejected", async () => {
    const { session, turn } = await h.client.sessions.create({ agent: "messenger", input: [] })
    await turn.send(text("first"))
    await turn.send([{ type: "text", text: "bad" }])
    await turn.send(text("done"))
    const o = await turn.wait({ timeout: "30s" })
    assert.equal(o.status, "settled")
    if (o.status === "settled") assert.deepEqual(o.outcome.result, { got: ["first", "done"] })
    const evs = (await session.events.list({ limit: 1000 })).records
    const rej = evs.find((e) => e.kind === "message.rejected")!
    assert.deepEqual([rej.data.reason, rej.data.delivery, rej.data.message], ["message_rejected", "not_delivered", "not now"])
    assert.equal(evs.filter((e) => e.kind === "message.delivered").length, 2)
  })

  test("ask: the Turn waits, the question is answered through the REST API", async () => {
    const { turn } = await h.client.sessions.create({ agent: "asker", input: [] })
    const pending = async (n: number) => {
      for (;;) {
        const p = await turn.asks.list()
        const q = p.items.filter((a) => a.status === "pending")
        if (p.items.length >= n && q.length) return q[0]
        await new Promise((r) => setTimeout(r, 100))
      }
    }
    const q1 = await pending(1)
    assert.equal(q1.question.answer.type, "choice")
    const answered = await turn.asks.respond(q1.id, { answer: { selected: ["yes"] }, responseId: "r-1" })
    assert.equal(answered.status, "responded")
    assert.equal((await turn.asks.respond(q1.id, { answer: { selected: ["yes"] }, responseId: "r-1" })).status, "responded")
    const q2 = await pending(2)
    await turn.asks.respond(q2.id, { answer: "because", responseId: "r-2" })
    const o = await turn.wait()
    assert.deepEqual(o.result, { selected: ["yes"], value: true, why: "because", by: "api_key" })
  })

  test("a Token completed by curl with its public credential", async () => {
    const { session, turn } = await h.client.sessions.create({ agent: "tokener", input: [] })
    let tok: { id: string; callbackUrl: string; publicAccessToken: string } | undefined
    for await (const ev of session.events.stream()) {
      if (ev.kind === "turn.output") { tok = (ev.data.content as Array<{ value: typeof tok }>)[0].value; break }
    }
    assert.match(tok!.publicAccessToken, /^hlmr_tok_/)
    const url = tok!.callbackUrl.startsWith("http") ? tok!.callbackUrl : h.url + tok!.callbackUrl
    const { stdout } = await run("curl", ["-sS", "-X", "POST", "-H", `Authorization: Bearer ${tok!.publicAccessToken}`, "-d", '{"data":{"approved":true}}', url])
    assert.equal(JSON.parse(stdout).status, "completed")
    const o = await turn.wait()
    assert.deepEqual(o.result, { approved: true, second: "wait_timeout" })
    const st = await h.client.tokens.get(tok!.id)
    assert.deepEqual([st.status, st.data], ["completed", { approved: true }])
  })

  test("an Actor receives its Session's Turns in one loop; a Timer resumes the Turn", async () => {
    const { session, turn } = await h.client.sessions.create({ agent: "counter", input: text("a") })
    assert.deepEqual((await turn.wait()).result, { n: 1, text: "a" })
    const t2 = await session.enqueue(text("b"))
    assert.deepEqual((await t2.wait()).result, { n: 2, text: "b" })
    const { turn: st } = await h.client.sessions.create({ agent: "sleeper", input: [] })
    const o = await st.wait()
    assert.equal(o.status, "completed")
    assert.ok((o.result as { waited: number }).waited >= 400)
  })

  test("a child process started in a Turn belongs to the Session: still alive in the next Turn", async () => {
    const { session, turn } = await h.client.sessions.create({ agent: "keeper", input: text("start") })
    const first = await turn.wait()
    assert.equal(first.status, "completed", JSON.stringify(first))
    const pid = (first.result as { pid: number }).pid
    const second = await (await session.enqueue(text("check"))).wait()
    assert.deepEqual(second.result, { pid, alive: true })
  })

  test("interrupt runs onCancel; the Turn settles interrupted and the Session serves the next Turn", async () => {
    const { session, turn } = await h.client.sessions.create({ agent: "stubborn", input: [] })
    for await (const ev of session.events.stream()) if (ev.kind === "turn.output") break
    const rec = await turn.interrupt()
    assert.equal(rec.status, "accepted")
    const o = await turn.wait()
    assert.deepEqual([o.status, o.error?.code], ["interrupted", "interrupted"])
    assert.match(textOf((await session.events.list()).records), /cancelled: interrupted/)
    const next = await session.enqueue([])
    for (;;) { if ((await next.get()).status === "running") break; await new Promise((r) => setTimeout(r, 50)) }
    assert.equal((await session.cancel()).status, "closed")
    assert.ok(["cancelled", "interrupted"].includes((await next.wait()).status))
  })

  test("a planner spawns a TypeScript worker through runtime MCP with the official MCP client", async () => {
    const { turn } = await h.client.sessions.create({ agent: "planner", input: [] })
    const o = await turn.wait()
    assert.equal(o.status, "completed", JSON.stringify(o))
    const r = o.result as { tools: string[]; narrowTools: string[]; sameScope: boolean; widening: string; waited: { status: string; outcome: { status: string; result: unknown } } }
    assert.deepEqual(r.tools, ["inspect_turn", "list_agents", "spawn", "wait_turn"])
    assert.deepEqual(r.narrowTools, ["inspect_turn", "wait_turn"])
    assert.equal(r.sameScope, true)
    assert.equal(r.widening, "forbidden")
    assert.equal(r.waited.status, "settled")
    assert.deepEqual(r.waited.outcome.result, { issue: 7, doubled: 14, title: "Issue 7" })
  })

  test("kill -9 of the control plane while a Turn waits: the Turn completes after the restart", async () => {
    const { session, turn } = await h.client.sessions.create({ agent: "sleeper", input: text("6s") })
    for await (const ev of session.events.stream()) if (ev.kind === "wait.started") break
    await h.restart({ kill: true })
    // Still waiting, or (when the restart took longer than the wait, on a
    // loaded machine) already completed by the overdue timer.
    const after = (await turn.get()).status
    assert.ok(after === "running" || after === "completed", "the Turn after the restart: " + after + "\n" + logTail(h, 4000))
    const o = await turn.wait()
    assert.equal(o.status, "completed", JSON.stringify(o) + "\n" + logTail(h, 2000))
    assert.ok((o.result as { waited: number }).waited >= 6000)
    const kinds = (await session.events.list({ limit: 1000 })).records.map((e) => e.kind)
    assert.ok(!kinds.includes("session.process_failed"), kinds.join(","))
  })
})

// A package of its own, so that its Sessions (one a second) do not load the main suite.
describe("end to end: a cron trigger", { skip: bin ? false : "no helmr binary: set HELMR_BIN" }, () => {
  let h: Helmr
  before(async () => {
    linkFixture(cronFixture)
    h = await startHelmr({ dir: cronFixture, bin, mode: (process.env.HELMR_TEST_MODE as "dev" | "server") ?? "dev" })
  })
  after(async () => { await h?.close() })

  test("a trigger firing every second admits a Session whose first Turn has source schedule and the trigger's input", async () => {
    const manifest = h.deployment.manifest as { agents: Array<{ id: string; triggers?: unknown }> }
    assert.deepEqual(manifest.agents.find((a) => a.id === "ticker")?.triggers,
      [{ name: "every-second", kind: "cron", pattern: "* * * * * *", timezone: "UTC", input: [{ type: "text", text: "tick" }], overlap: "skip" }])
    const deadline = Date.now() + 30_000
    let sessionId: string | undefined
    while (sessionId === undefined) {
      const page = await h.client.sessions.list({ agent: "ticker" })
      sessionId = page.items.find((s) => s.initialTurn !== null)?.id
      if (sessionId === undefined) {
        assert.ok(Date.now() < deadline, "no Session of ticker within 30 s:\n" + logTail(h, 3000))
        await new Promise((r) => setTimeout(r, 200))
      }
    }
    const session = h.client.sessions.ref(sessionId)
    const turns = await session.turns.list()
    const first = turns.items.find((t) => t.sequence === 1) ?? turns.items[0]
    assert.deepEqual(first.source, { kind: "schedule" })
    assert.deepEqual(first.input, [{ type: "text", text: "tick" }])
    const o = await session.turns.ref(first.id).wait()
    assert.equal(o.status, "completed", JSON.stringify(o) + "\n" + logTail(h, 3000))
    if (o.status === "completed" && o.payloadExpiredAt === undefined) assert.deepEqual(o.result, { text: "tick", source: "schedule" })
  })
})

test("the ts-quickstart reviewer, bundled from its package, runs a Turn through the protocol", async () => {
  const dir = path.join(root, "..", "..", "examples", "ts-quickstart")
  // What helmr dev does on a fresh clone: npm ci when node_modules is absent.
  if (!fs.existsSync(path.join(dir, "node_modules"))) await run("npm", ["ci", "--no-audit", "--no-fund"], { cwd: dir })
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "helmr-rev-")), "reviewer.mjs")
  await bundle(dir, out)
  const s = new FakeServer()
  await s.listen()
  try {
    s.start(out, "reviewer")
    const { peer } = await s.handshake()
    await peer.type("ready")
    peer.send(turnStart("t-1", []))
    const o = await peer.type("output")
    assert.deepEqual(o.content, text("Review started\n"))
    peer.send({ type: "ack", turn_id: "t-1", op: o.op, sequence: 1 })
    const st = await peer.type("turn.settle")
    assert.deepEqual([st.status, st.result, st.response], ["completed", { reviewed: true }, text("Review complete")])
    peer.send({ type: "ack", turn_id: "t-1", op: st.op })
    peer.send({ type: "shutdown" })
    assert.equal(await s.exit, 0)
  } finally {
    await s.close()
  }
})
