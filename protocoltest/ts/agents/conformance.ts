// The TypeScript SDK's conformance agent. It does exactly what
// protocoltest/README.md describes, as the Go SDK's (protocoltest/goagent)
// does, so that both SDKs are checked by the same vectors
// (go test ./protocoltest -run TestTypeScriptSDK).
import { agent, template, image, timers, tokens, MessageRejected } from "@helmr/sdk"
import type { StandardSchemaV1 } from "@helmr/sdk"

const box = template({
  id: "box",
  image: image("box").fromHost(),
  resources: { cpu: 1, memory: "256MiB" },
})

type Input = { do: string; text?: string; for?: string; cleanup?: string }

// A Standard Schema v1 validator without a library: an object with a string "do".
const inputSchema: StandardSchemaV1<unknown, Input> = {
  "~standard": {
    version: 1,
    vendor: "helmr-conformance",
    validate(value: unknown) {
      if (typeof value === "object" && value !== null && typeof (value as { do?: unknown }).do === "string") {
        return { value: value as Input }
      }
      return { issues: [{ message: "want an object with a string do" }] }
    },
  },
}

// codeOf is the stable code of an error, "" for none.
function codeOf(err: unknown): string {
  if (err === undefined || err === null) return ""
  const code = (err as { code?: unknown }).code
  return typeof code === "string" ? code : "unknown"
}

async function settled(p: Promise<unknown>): Promise<string> {
  try {
    await p
    return ""
  } catch (err) {
    return codeOf(err)
  }
}

export const conformance = agent({
  id: "conformance",
  template: box,
  inputSchema,
  async init() {
    return { ready: true }
  },
  async turn(turn, ctx) {
    const input = turn.input
    switch (input.do) {
      case "echo": {
        const r = await turn.output.write("echo: " + (input.text ?? ""))
        await turn.respond("echoed " + (input.text ?? ""))
        return { echo: input.text ?? "", sequence: r.sequence }
      }
      case "info":
        return {
          session_id: ctx.session.id,
          session_key: ctx.session.key ?? "",
          computer_id: ctx.computer.id,
          deployment_id: ctx.deployment.id,
          recovery: ctx.recovery.kind,
          init_ready: ctx.initResult.ready,
          turn_id: turn.id,
          turn_sequence: turn.sequence,
          source: turn.source.kind,
        }
      case "limits": {
        const parts = Array.from({ length: 65 }, () => ({ type: "text" as const, text: "x" }))
        const tooMany = await settled(turn.output.write(parts))
        const tooBig = await settled(turn.output.write("a".repeat(256 * 1024 + 1)))
        const server = await settled(turn.output.write("after"))
        return { local: [tooMany, tooBig], server }
      }
      case "respond_twice": {
        await turn.respond("one")
        return { second: await settled(turn.respond("two")) }
      }
      case "messages": {
        const got: string[] = []
        let finish!: () => void
        const done = new Promise<void>((resolve) => (finish = resolve))
        await turn.onMessage((m) => {
          const text = m.content.map((p) => (p.type === "text" ? p.text : "")).join("")
          if (text === "reject") throw new MessageRejected("rejected by design")
          got.push(text)
          if (text === "done") finish()
        })
        await done
        return { got }
      }
      case "block": {
        turn.onCancel(() => {
          if (input.cleanup === "fail") throw new Error("cleanup failed by design")
        })
        await new Promise<never>((_, reject) => {
          turn.signal.addEventListener("abort", () => reject(turn.signal.reason), { once: true })
        })
        return {}
      }
      case "fail":
        throw new Error("failed by design")
      case "timer":
        await timers.waitFor(input.for ?? "1s")
        return { timer: "fired" }
      case "nap": {
        // On the process's own clock, not a durable wait: the write that
        // follows happens whatever the connection's state (a park's pause).
        const ms = /^(\d+)ms$/.exec(input.for ?? "")
        if (!ms) throw new Error(`nap: for must be a Duration in ms, got ${JSON.stringify(input.for)}`)
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(resolve, Number(ms[1]))
          turn.signal.addEventListener("abort", () => { clearTimeout(t); reject(turn.signal.reason) }, { once: true })
        })
        await turn.output.write("awake")
        return { napped: true }
      }
      case "ask": {
        const a = await turn.ask({ prompt: "Your name?", answer: { type: "text" } })
        return { answer: a.answer, by: a.respondedBy.kind }
      }
      case "token": {
        const tok = await tokens.create({ timeout: "1h" })
        // unwrap() is the value, or throws the typed error (token_expired, …).
        const value = (await tok.wait()).unwrap()
        return {
          token_id: tok.id,
          callback_url: tok.callbackUrl,
          public: tok.publicAccessToken.startsWith("hlmr_tok_"),
          value,
        }
      }
      case "mcp": {
        const c = await ctx.mcp.getConnectionOptions({ allow: [{ operation: "start", agents: ["conformance"] }] })
        const refused = await settled(
          ctx.mcp.getConnectionOptions({ allow: [{ operation: "cancel_session", agents: ["conformance"] }] }),
        )
        return { loopback: c.url.startsWith("http://127.0.0.1:"), refused }
      }
    }
    throw Object.assign(new Error(`unknown do ${JSON.stringify(input.do)}`), { code: "invalid_request" })
  },
})

export const initFails = agent({
  id: "init-fails",
  template: box,
  async init() {
    throw new Error("init refused by design")
  },
  async turn() {
    return "unreachable"
  },
})
