// Unit tests of the authoring API, schemas, content rules and the manifest.
import assert from "node:assert/strict"
import * as fs from "node:fs"
import * as path from "node:path"
import { test } from "node:test"
import { fileURLToPath, pathToFileURL } from "node:url"
import { z } from "zod"
import { agent, actor, template, image, MessageRejected, HelmrError, isAgentDefinition, triggers, isTrigger } from "@helmr/sdk"
import type { StandardSchemaV1 } from "@helmr/sdk"
import { buildManifest, collectAgents } from "@helmr/sdk/runtime"

const host = template({ id: "host", image: image("host").fromHost() })
const noop = async () => null

test("agent() throws TypeError on a blank or bad id, a non-Template template, a non-function turn", () => {
  assert.throws(() => agent({ id: "", template: host, turn: noop }), TypeError)
  assert.throws(() => agent({ id: "   ", template: host, turn: noop }), TypeError)
  assert.throws(() => agent({ id: "-bad", template: host, turn: noop }), /must match/)
  assert.throws(() => agent({ id: "x".repeat(129), template: host, turn: noop }), TypeError)
  assert.throws(() => agent({ id: "a", template: { id: "host" } as never, turn: noop }), /template\(\) definition/)
  assert.throws(() => agent({ id: "a", template: host, turn: "no" as never }), /turn must be a function/)
  assert.throws(() => agent({ id: "a", template: host, turn: noop, inputSchema: { parse() {} } as never }), /Standard Schema/)
  assert.throws(() => agent({ id: "a", template: host, turn: noop, closeAfterIdle: "soon" as never }), /closeAfterIdle/)
  assert.throws(() => agent({ id: "a", template: host, turn: noop, idleTimeout: "2h" }), /1ms to 1h/)
  assert.throws(() => agent({ id: "a", template: host, turn: noop, runtimeMcp: {} as never }), /runtimeMcp.*allow/)
  assert.throws(() => agent({ id: "a", template: host, turn: noop, runtimeMcp: { allow: [{ operation: "inspect_turn", agents: ["b"], computer: "new" }] } as never }), /computer is only for start and spawn/)
  assert.throws(() => agent({ id: "a", template: host, turn: noop, runtimeMcp: { allow: [{ operation: "wait_turn", agents: ["b"] }] } as never }), /not a runtime MCP operation/)
  assert.throws(() => actor({ id: "a", template: host, run: undefined as never }), /run must be a function/)
})

test("agent() returns a frozen definition with kind agent and the defaults", () => {
  const a = agent({ id: "reviewer", template: host, turn: noop })
  assert.equal(a.kind, "agent")
  assert.equal(a.id, "reviewer")
  assert.equal(a.closeAfterIdle, "7d")
  assert.equal(a.hibernateAfterIdle, "never")
  assert.ok(Object.isFrozen(a))
  assert.throws(() => { (a as { id: string }).id = "x" }, TypeError)
  assert.ok(isAgentDefinition(a))
  assert.ok(!isAgentDefinition({ kind: "agent", id: "x" }))
})

test("template() and image(): build steps, host image, resources checks", () => {
  const img = image("repo").from("node:24-bookworm-slim").run("npm", "ci").copy("/app", ".").workdir("/app").env("A", "1").user("node")
  const t = template({ id: "repo", image: img, resources: { cpu: 1, memory: "1GiB" }, network: true })
  assert.equal(t.kind, "template")
  assert.ok(Object.isFrozen(t))
  const a = agent({ id: "r", template: t, turn: noop, maxTurnDuration: "10m", runtimeMcp: { allow: [] } })
  const m = buildManifest([a])
  assert.deepEqual(m.templates, [{
    id: "repo",
    image: { name: "repo", from: "node:24-bookworm-slim", steps: [
      { op: "run", args: ["npm", "ci"] }, { op: "copy", args: ["/app", "."] }, { op: "workdir", args: ["/app"] },
      { op: "env", args: ["A", "1"] }, { op: "user", args: ["node"] }] },
    resources: { cpu: 1, memory: "1GiB" },
    network: true,
  }])
  assert.deepEqual(buildManifest([agent({ id: "h", template: host, turn: noop })]).templates[0].image, { name: "host", host: true })
  assert.throws(() => template({ id: "x", image: image("x") }), /from\(ref\) or .fromHost/)
  assert.throws(() => template({ id: "x", image: image("x").fromHost(), resources: { memory: "lots" } }), /memory/)
  assert.throws(() => image("x").from(""), TypeError)
})

test("manifest: sdk typescript, runtime node, input kinds, JSON Schemas from zod 4, unavailable otherwise", () => {
  const custom: StandardSchemaV1<unknown, { n: number }> = {
    "~standard": { version: 1, vendor: "custom", validate: (v) => (typeof v === "number" ? { value: { n: v } } : { issues: [{ message: "want a number" }] }) },
  }
  const defs = [
    agent({ id: "text", template: host, turn: noop }),
    agent({ id: "typed", template: host, inputSchema: z.object({ issue: z.number().int() }), resultSchema: z.object({ ok: z.boolean() }), turn: async () => ({ ok: true }), init: async () => 1, maxTurnDuration: "10m" }),
    agent({ id: "custom", template: host, inputSchema: custom, turn: noop }),
    actor({ id: "act", template: host, idleTimeout: "5s", async run() {} }),
  ]
  const m = buildManifest(defs)
  assert.equal(m.version, "helmr.manifest.v1")
  assert.equal(m.sdk, "typescript")
  assert.equal(m.runtime, "node")
  const [t, ty, c, ac] = m.agents
  assert.deepEqual(t, { id: "text", template: "host", input_kind: "text", close_after_idle: "7d", hibernate_after_idle: "never", has_init: false })
  assert.equal(ty.input_kind, "json")
  assert.deepEqual((ty.input_schema as Record<string, unknown>).properties, { issue: { type: "integer", minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER } })
  assert.deepEqual((ty.result_schema as Record<string, unknown>).required, ["ok"])
  assert.equal(ty.max_turn_duration, "10m")
  assert.equal(ty.has_init, true)
  assert.deepEqual(c.input_schema, { unavailable: "the custom validator has no JSON Schema form" })
  assert.equal(ac.actor, true)
  assert.equal(ac.idle_timeout, "5s")
  assert.throws(() => buildManifest([defs[0], defs[0]]), /declared twice/)
  const other = template({ id: "host", image: image("host").from("busybox") })
  assert.throws(() => buildManifest([defs[0], agent({ id: "b", template: other, turn: noop })]), /two different templates/)
  assert.throws(() => buildManifest([agent({ id: "p", template: host, turn: noop, runtimeMcp: { allow: [{ operation: "spawn", agents: ["ghost"] }] } })]), /not an Agent of this manifest/)
})

test("triggers.cron: defaults, a frozen copy of the input; TypeError on a bad name, pattern, time zone, overlap, non-JSON input", () => {
  const t = triggers.cron("nightly", "0 3 * * *")
  assert.deepEqual({ ...t }, { kind: "cron", name: "nightly", pattern: "0 3 * * *", timezone: "UTC", overlap: "skip", input: undefined })
  assert.ok(Object.isFrozen(t))
  assert.ok(isTrigger(t))
  assert.ok(!isTrigger({ ...t }))
  const input = [{ type: "text" as const, text: "hi" }]
  const c = triggers.cron("c", "@daily", { input, timezone: "Europe/Paris", overlap: "allow" })
  input[0].text = "changed"
  assert.deepEqual(c.input, [{ type: "text", text: "hi" }])
  assert.ok(Object.isFrozen(c.input) && Object.isFrozen((c.input as unknown[])[0]))
  for (const ok of ["* * * * *", "*/5 * * * * *", "0 9 * * MON-FRI", "0 0 1,15 JAN ?", " 0  3 * * * ", "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@every 1h30m"]) {
    assert.equal(triggers.cron("ok", ok).pattern, ok)
  }
  for (const name of ["", "-x", "a b", "x".repeat(129), 7 as never]) {
    assert.throws(() => triggers.cron(name, "@daily"), (e: unknown) => e instanceof TypeError && /name .* must match/.test((e as Error).message))
  }
  assert.equal(triggers.cron("a._-Z9" + "x".repeat(122), "@daily").name.length, 128)
  const bad: Array<[unknown, RegExp]> = [
    ["", /the pattern is empty/], ["   ", /the pattern is empty/], [undefined, /pattern must be a string/],
    ["* * * *", /4 fields: want five/], ["0 0 * * * * *", /7 fields/], ["@often", /unknown descriptor/],
    ["@every", /unknown descriptor/], ["@every soon", /unknown descriptor/], ["@daily ", /unknown descriptor/],
    ["* * * * $", /field "\$" is not a cron field/], ["CRON_TZ=Europe/Paris * * * * *", /timezone option/], ["TZ=UTC 0 * * * *", /timezone option/],
  ]
  for (const [p, re] of bad) assert.throws(() => triggers.cron("t", p as string), (e: unknown) => e instanceof TypeError && re.test((e as Error).message) && (e as Error).message.startsWith('triggers.cron "t": '), String(p))
  assert.throws(() => triggers.cron("t", "@daily", { timezone: "Mars/Olympus" }), /time zone "Mars\/Olympus": not an IANA time zone/)
  assert.throws(() => triggers.cron("t", "@daily", { timezone: "" }), /time zone "": the time zone is empty/)
  assert.throws(() => triggers.cron("t", "@daily", { timezone: "+01:00" }), /not an offset/)
  assert.throws(() => triggers.cron("t", "@daily", { timezone: "europe/paris" }), /write it "Europe\/Paris"/)
  assert.throws(() => triggers.cron("t", "@daily", { timezone: 1 as never }), /timezone must be a string/)
  assert.equal(triggers.cron("t", "@daily", { timezone: "America/New_York" }).timezone, "America/New_York")
  assert.throws(() => triggers.cron("t", "@daily", { overlap: "queue" as never }), /overlap "queue": want "skip" or "allow"/)
  assert.throws(() => triggers.cron("t", "@daily", null as never), /options must be an object/)
  assert.throws(() => triggers.cron("t", "@daily", { input: { n: NaN } as never }), /input\.n: NaN is not a finite number/)
  assert.throws(() => triggers.cron("t", "@daily", { input: 1n as never }), TypeError)
})

test("agent() triggers: checked against the input contract, names unique; the manifest carries them", async () => {
  const at = (e: unknown, re: RegExp) => e instanceof TypeError && re.test((e as Error).message)
  const text = agent({ id: "ticker", template: host, turn: noop, triggers: [
    triggers.cron("every-second", "* * * * * *"),
    triggers.cron("morning", "0 9 * * 1-5", { timezone: "Europe/Paris", input: [{ type: "text", text: "good morning" }], overlap: "allow" }),
  ] })
  assert.ok(Object.isFrozen(text.triggers))
  const typed = agent({ id: "digest", template: host, inputSchema: z.object({ topic: z.string() }).transform((v) => v.topic.length), turn: noop,
    triggers: [triggers.cron("hourly", "@hourly", { input: { topic: "builds" } })] })
  const act = actor({ id: "act", template: host, async run() {}, triggers: [triggers.cron("daily", "@daily", { input: [] })] })
  const m = buildManifest([text, typed, act, agent({ id: "none", template: host, turn: noop, triggers: [] })])
  assert.deepEqual(m.agents[0].triggers, [
    { name: "every-second", kind: "cron", pattern: "* * * * * *", timezone: "UTC", input: [], overlap: "skip" },
    { name: "morning", kind: "cron", pattern: "0 9 * * 1-5", timezone: "Europe/Paris", input: [{ type: "text", text: "good morning" }], overlap: "allow" },
  ])
  // The client input goes in the manifest, not the schema's output: the runtime validates it at each fire.
  assert.deepEqual(m.agents[1].triggers, [{ name: "hourly", kind: "cron", pattern: "@hourly", timezone: "UTC", input: { topic: "builds" }, overlap: "skip" }])
  assert.deepEqual(m.agents[2].triggers, [{ name: "daily", kind: "cron", pattern: "@daily", timezone: "UTC", input: [], overlap: "skip" }])
  assert.equal("triggers" in m.agents[3], false)
  assert.deepEqual(Object.keys((m.agents[0].triggers as object[])[0]), ["name", "kind", "pattern", "timezone", "input", "overlap"])
  assert.deepEqual(JSON.parse(JSON.stringify(m)).agents[0].triggers, m.agents[0].triggers)

  const d = triggers.cron("dup", "@daily")
  assert.throws(() => agent({ id: "a", template: host, turn: noop, triggers: [d, triggers.cron("dup", "@hourly")] }), (e: unknown) => at(e, /^agent "a": trigger "dup" is declared twice$/))
  assert.throws(() => agent({ id: "a", template: host, turn: noop, triggers: d as never }), (e: unknown) => at(e, /triggers must be an array/))
  assert.throws(() => agent({ id: "a", template: host, turn: noop, triggers: [{ ...d }] as never }), (e: unknown) => at(e, /triggers\[0\] must be a triggers.cron/))
  // A text Agent takes InputContent only.
  for (const input of ["hi", [{ type: "json", value: 1 }], [{ type: "text", text: "x", extra: 1 }], { text: "x" }, null, Array.from({ length: 65 }, () => ({ type: "text", text: "" }))]) {
    assert.throws(() => agent({ id: "a", template: host, turn: noop, triggers: [triggers.cron("t", "@daily", { input: input as never })] }),
      (e: unknown) => at(e, /^agent "a": trigger "t": a text Agent's input is InputContent/), JSON.stringify(input))
  }
  assert.throws(() => actor({ id: "a", template: host, async run() {}, triggers: [triggers.cron("t", "@daily", { input: "hi" as never })] }), (e: unknown) => at(e, /^actor "a": trigger "t": a text Agent/))
  assert.throws(() => agent({ id: "a", template: host, turn: noop, triggers: [triggers.cron("big", "@daily", { input: [{ type: "text", text: "x".repeat(300 << 10) }] })] }), (e: unknown) => at(e, /input is \d+ bytes of JSON; the limit is 262144/))
  // A schema Agent: its inputSchema checks the input when it validates synchronously.
  const schema = z.object({ topic: z.string() })
  assert.throws(() => agent({ id: "a", template: host, inputSchema: schema, turn: noop, triggers: [triggers.cron("t", "@daily", { input: { topic: 1 } as never })] }),
    (e: unknown) => at(e, /^agent "a": trigger "t": input does not match the Agent's inputSchema: topic: /))
  assert.throws(() => agent({ id: "a", template: host, inputSchema: schema, turn: noop, triggers: [triggers.cron("t", "@daily")] }), (e: unknown) => at(e, /does not match the Agent's inputSchema/))
  const nullable = agent({ id: "n", template: host, inputSchema: z.null(), turn: noop, triggers: [triggers.cron("t", "@daily")] })
  assert.deepEqual(nullable.triggers?.[0].input, null)
  // An async validator is not awaited (each fire validates the input); no unhandled rejection.
  const async = agent({ id: "async", template: host, inputSchema: schema.refine(async (v) => v.topic !== "no"), turn: noop,
    triggers: [triggers.cron("t", "@daily", { input: { topic: "no" } })] })
  assert.deepEqual(async.triggers?.[0].input, { topic: "no" })
  const custom: StandardSchemaV1<unknown, unknown> = { "~standard": { version: 1, vendor: "custom", validate: () => { throw new Error("boom") } } }
  assert.throws(() => agent({ id: "a", template: host, inputSchema: custom, turn: noop, triggers: [triggers.cron("t", "@daily", { input: 1 })] }), (e: unknown) => at(e, /inputSchema threw on the input: boom/))
  await new Promise((r) => setTimeout(r, 10))
})

test("collectAgents takes every exported definition once", () => {
  const a = agent({ id: "a", template: host, turn: noop })
  const b = agent({ id: "b", template: host, turn: noop })
  assert.deepEqual(collectAgents([{ a, default: a, helper: 1 }, { b, host }]).map((d) => d.id), ["a", "b"])
})

test("MessageRejected and HelmrError: instanceof works across two copies of the SDK in one process", async () => {
  const dist = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "dist")
  const copy = path.join(path.dirname(dist), "build-test", "copy2")
  fs.rmSync(copy, { recursive: true, force: true })
  fs.cpSync(dist, copy, { recursive: true })
  const two = await import(pathToFileURL(path.join(copy, "index.js")).href) as typeof import("@helmr/sdk")
  assert.notEqual(two.MessageRejected, MessageRejected, "two distinct copies")
  const fromTwo = new two.MessageRejected("not now")
  assert.ok(fromTwo instanceof MessageRejected)
  assert.ok(new MessageRejected("x") instanceof two.MessageRejected)
  assert.ok(fromTwo instanceof Error)
  assert.equal(fromTwo.message, "not now")
  assert.ok(!(new Error("x") instanceof MessageRejected))
  assert.ok(new two.HelmrError("conflict") instanceof HelmrError)
  // A definition from the other copy is recognised too (the bundle may mix them).
  const t2 = two.template({ id: "h", image: two.image("h").fromHost() })
  const a2 = two.agent({ id: "x", template: t2, turn: noop })
  assert.ok(isAgentDefinition(a2))
  assert.equal(agent({ id: "y", template: t2, turn: noop }).template, t2)
})

test("HelmrError carries code, message and details", () => {
  const e = new HelmrError("limit_exceeded", "too big", { used: 1 })
  assert.equal(e.code, "limit_exceeded")
  assert.equal(e.message, "limit_exceeded: too big")
  assert.deepEqual(e.toBody(), { code: "limit_exceeded", message: "too big", details: { used: 1 } })
})

test("the session credential: read from the fd in HELMR_SESSION_TOKEN_FD (then closed), else HELMR_SESSION_TOKEN; both removed", async () => {
  const { takeSessionToken } = await import("@helmr/sdk/runtime")
  const file = path.join(fs.mkdtempSync(path.join((await import("node:os")).tmpdir(), "tok-")), "t")
  fs.writeFileSync(file, "hlmr_proc_abc\n")
  const fd = fs.openSync(file, "r")
  const env: NodeJS.ProcessEnv = { HELMR_SESSION_TOKEN_FD: String(fd), HELMR_SESSION_TOKEN: "ignored", OTHER: "1" }
  assert.equal(takeSessionToken(env), "hlmr_proc_abc")
  assert.deepEqual(env, { OTHER: "1" })
  assert.throws(() => fs.fstatSync(fd), /EBADF/, "the fd is closed")
  const env2: NodeJS.ProcessEnv = { HELMR_SESSION_TOKEN: " hlmr_proc_def " }
  assert.equal(takeSessionToken(env2), "hlmr_proc_def")
  assert.deepEqual(env2, {})
  assert.throws(() => takeSessionToken({ HELMR_SESSION_TOKEN_FD: "x" }), /not a file descriptor/)
})

test("content rules: string shorthand, part checks and limits with their codes", async () => {
  const { toContent, checkContentSize, parseInputContent } = await import("../src/content.js")
  assert.deepEqual(toContent("hi"), [{ type: "text", text: "hi" }])
  assert.deepEqual(toContent([]), [])
  const code = (fn: () => unknown) => { try { fn(); return "none" } catch (e) { return (e as HelmrError).code } }
  assert.equal(code(() => toContent(Array.from({ length: 65 }, () => ({ type: "text", text: "" })))), "limit_exceeded")
  assert.equal(code(() => toContent([{ type: "file", path: "/x" }])), "output_invalid")
  assert.equal(code(() => toContent([{ type: "json", value: NaN }])), "output_invalid")
  assert.equal(code(() => toContent([{ type: "json", value: { a: 1n } }])), "output_invalid")
  assert.equal(code(() => toContent(null)), "output_invalid")
  assert.equal(code(() => checkContentSize(toContent("x".repeat(256 << 10)), "output")), "limit_exceeded")
  assert.equal(code(() => parseInputContent([{ type: "json", value: 1 }])), "input_invalid")
  assert.equal(code(() => parseInputContent("hi")), "input_invalid")
})

test("reconnect window in running time: an attempt counts at most its pause + dial and hello timeouts + 1 s; park pauses", async () => {
  const { attemptShareMs, parkPauseMs } = await import("../src/protocol.js")
  assert.equal(attemptShareMs(300, 50), 300)
  assert.equal(attemptShareMs(72 * 3_600_000, 2000), 2000 + 5000 + 10_000 + 1000)
  assert.equal(attemptShareMs(-3_600_000, 1000), 0)
  assert.equal(parkPauseMs(undefined), 0)
  assert.equal(parkPauseMs("5s"), 5000)
  assert.equal(parkPauseMs("1.5s"), 1500)
  assert.equal(parkPauseMs("soon"), undefined)
})

test("loopback origins", async () => {
  const { isLoopbackOrigin } = await import("../src/dispatcher.js")
  for (const o of ["http://127.0.0.1:8080", "http://localhost", "http://[::1]:3000", "https://127.1.2.3", "http://api.localhost"]) assert.ok(isLoopbackOrigin(o), o)
  for (const o of ["http://10.0.0.1", "https://example.com", "http://127.0.0.1.example.com", undefined, "not a url"]) assert.ok(!isLoopbackOrigin(o), String(o))
})

test("output.pipe: an abort ends it while the iterable is still waiting for its next item", async () => {
  const { TurnRuntime } = await import("../src/turn.js")
  const rt = new TurnRuntime({ id: "t-1", sequence: 1, created_at: new Date().toISOString(), input: [] } as never, { conn: {} as never, waiters: new Map() })
  const turn = rt.handle([])
  let returned = false
  const stuck: AsyncIterable<string> = {
    [Symbol.asyncIterator]: () => ({
      next: () => new Promise<IteratorResult<string>>(() => {}),
      return: async () => { returned = true; return { done: true, value: undefined } },
    }),
  }
  const ac = new AbortController()
  const piped = turn.output.pipe(stuck, { signal: ac.signal })
  setTimeout(() => ac.abort(new Error("stop")), 20)
  await assert.rejects(piped, /stop/)
  assert.ok(returned, "the iterator is closed")
  // The Turn's own signal ends it too.
  const rt2 = new TurnRuntime({ id: "t-2", sequence: 2, created_at: new Date().toISOString(), input: [] } as never, { conn: {} as never, waiters: new Map() })
  const p2 = rt2.handle([]).output.pipe(stuck)
  setTimeout(() => rt2.cancel(new HelmrError("interrupted")), 20)
  await assert.rejects(p2, (e: unknown) => (e as HelmrError).code === "interrupted")
})

test("timers reject (not throw) on a bad duration", async () => {
  const { timers } = await import("@helmr/sdk")
  let p: Promise<void> | undefined
  assert.doesNotThrow(() => { p = timers.waitFor("soon" as never) })
  await assert.rejects(p!, TypeError)
})
