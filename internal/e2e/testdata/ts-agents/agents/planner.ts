import { agent } from "@helmr/sdk"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { z } from "zod"
import { box } from "./box.js"

// A worker does one small task.
export const tsworker = agent({
  id: "tsworker",
  template: box,
  inputSchema: z.object({ word: z.string().min(1) }),
  async turn(turn) {
    const w = turn.input.word
    return { word: w, upper: w.toUpperCase(), letters: [...w].length }
  },
})

// The planner spawns one TypeScript worker per word of its input through
// the runtime MCP server, with the official MCP TypeScript SDK's client, and
// returns their results in order. Its scope (spawn and watch workers) is its
// maximum: it holds no API key.
export const planner = agent({
  id: "planner",
  template: box,
  runtimeMcp: {
    allow: [
      { operation: "spawn", agents: ["tsworker"] },
      { operation: "inspect_turn", agents: ["tsworker"] },
    ],
  },
  async init(ctx) {
    const conn = await ctx.mcp.getConnectionOptions()
    const client = new Client({ name: "planner", version: "1.0.0" })
    await client.connect(new StreamableHTTPClientTransport(new URL(conn.url), { requestInit: { headers: conn.headers } }))
    return { client }
  },
  async turn(turn, ctx) {
    const { client } = ctx.initResult
    const call = async (name: string, args: Record<string, unknown>) => {
      const res = await client.callTool({ name, arguments: args })
      const content = res.content as Array<{ type: string; text?: string }>
      const text = content[0]?.text ?? ""
      if (res.isError) throw new Error(`${name}: ${text}`)
      return JSON.parse(text)
    }
    const words = turn.input.map((p) => (p.type === "text" ? p.text : "")).join("").split(/\s+/).filter(Boolean)
    const workers: Array<{ session_id: string; turn_id: string }> = []
    for (const [i, word] of words.entries()) {
      const r = await call("spawn", { agent: "tsworker", input: { word }, idempotency_key: `${turn.id}/${i}` })
      workers.push(r)
      await turn.output.write(`spawned worker ${r.session_id} for ${JSON.stringify(word)}\n`)
    }
    const reports = []
    for (const w of workers) {
      let res: { status: string; outcome?: { status: string; result?: unknown; error?: unknown } } = { status: "timeout" }
      while (res.status !== "settled") res = await call("wait_turn", { session_id: w.session_id, turn_id: w.turn_id, timeout: "5m" })
      if (res.outcome?.status !== "completed") throw new Error(`worker ${w.session_id}: ${JSON.stringify(res.outcome)}`)
      reports.push(res.outcome.result)
    }
    await turn.respond(`${reports.length} workers done`)
    return { reports }
  },
})
