/**
 * The runtime MCP server inside the session process (internal/mcp): a
 * Streamable HTTP endpoint on loopback with one random bearer credential per
 * scope. The control plane decides every call (mcp.scope, mcp.call).
 */
import { createHash, randomBytes } from "node:crypto"
import { createServer } from "node:http"
import type { IncomingMessage, Server, ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import type { RuntimeMcpConnectionOptions } from "./agent.js"
import { HelmrError } from "./errors.js"
import { checkPolicy } from "./policy.js"
import type { RuntimeMcpPolicy } from "./policy.js"

export const maxScopes = 16

/** What the MCP server needs of the connection. */
export interface McpBackend {
  resolveScope(policy: RuntimeMcpPolicy | undefined): Promise<unknown>
  call(scope: unknown, tool: string, args: unknown): Promise<unknown>
}

const sessionId = `"session_id":{"type":"string","description":"The target Session's ID."}`
const turnId = `"turn_id":{"type":"string","description":"The target Turn's ID."}`
const idemOpt = `"idempotency_key":{"type":"string","maxLength":256,"description":"Makes a retry safe: the same key and arguments return the first answer."}`
const input = `"input":{"description":"The Turn's input: a text Agent takes Content ([{\\"type\\":\\"text\\",\\"text\\":\\"…\\"}]); a typed Agent takes JSON matching its input schema (see list_agents)."}`
const schema = (props: string, ...required: string[]) => JSON.parse(`{"type":"object","properties":{${props}},"required":${JSON.stringify(required)},"additionalProperties":false}`)
const create = () => schema(`"agent":{"type":"string","description":"The Agent key to create a Session of."},${input},"idempotency_key":{"type":"string","minLength":1,"maxLength":256,"description":"Required: a retry with the same key returns the first Session instead of creating another."},"computer_id":{"type":"string","description":"Place the Session on this existing Computer (the caller's, when the scope allows); omit for a new Computer."}`, "agent", "input", "idempotency_key")

interface Tool { name: string; ops: string[]; description: string; inputSchema: unknown }
/** The tools, as internal/mcp/tools.go lists them. */
export const tools: Tool[] = [
  { name: "start", ops: ["start"], inputSchema: create(), description: "Start a new independent root Session of an Agent on the Environment's current Deployment, with its first Turn. Returns {session_id, turn_id, sequence, created}." },
  { name: "spawn", ops: ["spawn"], inputSchema: create(), description: "Spawn a child Session owned by the caller, on the caller's Deployment, with its first Turn. Cancelling or interrupting the caller's Session reaches its children. Returns {session_id, turn_id, sequence, created}." },
  { name: "enqueue", ops: ["enqueue"], inputSchema: schema(`${sessionId},${input},${idemOpt}`, "session_id", "input"), description: "Queue a new Turn at the end of a Session's FIFO. Returns the Turn." },
  { name: "send_turn", ops: ["send_turn"], inputSchema: schema(`${sessionId},${turnId},"content":{"description":"The message: Content ([{\\"type\\":\\"text\\",\\"text\\":\\"…\\"}])."},${idemOpt}`, "session_id", "turn_id", "content"), description: "Send a message to one running Turn. Acceptance is not delivery. Returns {id, status}." },
  { name: "inspect_session", ops: ["inspect_session"], inputSchema: schema(sessionId, "session_id"), description: "Read a Session: status, holds, initial Turn." },
  { name: "list_sessions", ops: ["inspect_session"], inputSchema: schema(`"agent":{"type":"string"},"status":{"type":"string","enum":["open","closing","closed"]},"cursor":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":100}`), description: "List the Sessions the caller started or spawned, oldest first." },
  { name: "inspect_turn", ops: ["inspect_turn"], inputSchema: schema(`${sessionId},${turnId}`, "session_id", "turn_id"), description: "Read a Turn: status, result or error." },
  { name: "wait_turn", ops: ["inspect_turn"], inputSchema: schema(`${sessionId},${turnId},"timeout":{"type":"string","description":"How long to wait, as \\"30s\\", \\"5m\\" (default 60s, at most 10m)."}`, "session_id", "turn_id"), description: "Wait for a Turn to settle, up to timeout. Returns {status: \"settled\", outcome} or {status: \"timeout\"}; waiting never cancels the Turn." },
  { name: "interrupt_turn", ops: ["interrupt_turn"], inputSchema: schema(`${sessionId},${turnId},${idemOpt}`, "session_id", "turn_id"), description: "Interrupt one running Turn of a Session the caller owns (no hold)." },
  { name: "interrupt_session", ops: ["interrupt_session"], inputSchema: schema(`${sessionId},${idemOpt}`, "session_id"), description: "Hold a Session the caller owns and everything it owns: running Turns are interrupted, queued ones wait. Returns the hold_id to resume with." },
  { name: "resume_session", ops: ["resume_session"], inputSchema: schema(`${sessionId},"hold_id":{"type":"string","description":"A hold this caller placed with interrupt_session."},${idemOpt}`, "session_id", "hold_id"), description: "Release exactly one hold the caller placed with interrupt_session." },
  { name: "close_session", ops: ["close_session"], inputSchema: schema(`${sessionId},${idemOpt}`, "session_id"), description: "Close a Session the caller owns: it admits no new Turns and closes once its retained work drains." },
  { name: "cancel_session", ops: ["cancel_session"], inputSchema: schema(`${sessionId},${idemOpt}`, "session_id"), description: "Cancel a Session the caller owns and its owned tree: queued work is discarded, running work is asked to stop." },
  { name: "list_agents", ops: ["start", "spawn"], inputSchema: schema(""), description: "List the Agents this scope may start or spawn, with their input schemas and placements." },
  { name: "list_computers", ops: ["list_computers"], inputSchema: schema(""), description: "List the existing Computers a created Session may be placed on." },
]

interface Scope { policy: unknown; token: string; ops: Set<string> }

/** The process's runtime MCP server; it listens on first use. */
export class McpRuntime {
  private server: Server | undefined
  private url = ""
  private closed = false
  private readonly scopes = new Map<string, Scope>()
  private readonly byToken = new Map<string, Scope>()
  private maxScope: Scope | undefined

  constructor(private readonly backend: McpBackend) {}

  /** A scoped URL and headers; omitting the policy inherits the Agent's maximum. */
  async getConnectionOptions(policy?: RuntimeMcpPolicy): Promise<RuntimeMcpConnectionOptions> {
    if (policy !== undefined) checkPolicy(policy)
    else if (this.maxScope) return this.connection(this.maxScope)
    const norm = await this.backend.resolveScope(policy)
    if (this.closed) throw new HelmrError("unavailable", "the session process is shutting down")
    const key = JSON.stringify(norm)
    let s = this.scopes.get(key)
    if (!s) {
      if (this.scopes.size >= maxScopes) throw new HelmrError("limit_exceeded", `this session process already has ${maxScopes} distinct runtime MCP scopes, the most it may have; reuse one`)
      const ops = new Set<string>()
      for (const r of (norm as { allow?: Array<{ operation: string; agents?: string[] }> })?.allow ?? []) {
        if (r.operation === "list_computers" || (r.agents?.length ?? 0) > 0) ops.add(r.operation)
      }
      s = { policy: norm, token: randomBytes(32).toString("base64url"), ops }
      this.scopes.set(key, s)
      this.byToken.set(hash(s.token), s)
    }
    if (policy === undefined) this.maxScope = s
    await this.listen()
    return this.connection(s)
  }

  private connection(s: Scope): RuntimeMcpConnectionOptions {
    return Object.freeze({ url: this.url, headers: Object.freeze({ Authorization: `Bearer ${s.token}` }) })
  }

  private async listen(): Promise<void> {
    if (this.server) return
    const srv = createServer((req, res) => void this.serve(req, res))
    this.server = srv
    await new Promise<void>((resolve, reject) => { srv.once("error", reject); srv.listen(0, "127.0.0.1", () => resolve()) })
    srv.unref()
    this.url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}/mcp`
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const send = (status: number, body?: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, body === undefined ? headers : { "Content-Type": "application/json", ...headers })
      res.end(body === undefined ? undefined : JSON.stringify(body))
    }
    if ((req.url ?? "").split("?")[0] !== "/mcp") return send(404, { error: { code: "not_found", message: "no such path" } })
    const auth = req.headers.authorization ?? ""
    const s = auth.startsWith("Bearer ") ? this.byToken.get(hash(auth.slice(7))) : undefined
    if (!s) return send(401, { error: { code: "unauthorized", message: "a runtime MCP bearer credential from getConnectionOptions is required" } }, { "WWW-Authenticate": "Bearer" })
    if (req.method === "DELETE") return send(200, {})
    if (req.method !== "POST") return send(405, { jsonrpc: "2.0", error: { code: -32000, message: "Method not allowed: this server answers POST with JSON" }, id: null }, { Allow: "POST, DELETE" })
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    let body: unknown
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
    } catch {
      return send(400, { jsonrpc: "2.0", error: { code: -32700, message: "Parse error" }, id: null })
    }
    const batch = Array.isArray(body)
    const replies = (await Promise.all((batch ? body as unknown[] : [body]).map((m) => this.handle(s, m as Rpc)))).filter((r) => r !== undefined)
    if (replies.length === 0) return send(202)
    send(200, batch ? replies : replies[0])
  }

  private async handle(s: Scope, m: Rpc): Promise<unknown> {
    if (typeof m !== "object" || m === null || m.jsonrpc !== "2.0" || typeof m.method !== "string") {
      return { jsonrpc: "2.0", id: m?.id ?? null, error: { code: -32600, message: "Invalid Request" } }
    }
    if (m.id === undefined || m.id === null) return undefined // a notification
    const ok = (result: unknown) => ({ jsonrpc: "2.0", id: m.id, result })
    switch (m.method) {
      case "initialize": {
        const v = (m.params as { protocolVersion?: string } | undefined)?.protocolVersion
        return ok({ protocolVersion: typeof v === "string" ? v : "2025-06-18", capabilities: { tools: { listChanged: false } }, serverInfo: { name: "helmr-runtime", version: "v1" } })
      }
      case "ping":
        return ok({})
      case "tools/list":
        return ok({ tools: tools.filter((t) => t.ops.some((o) => s.ops.has(o))).map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema })) })
      case "tools/call": {
        const p = (m.params ?? {}) as { name?: string; arguments?: unknown }
        const t = tools.find((x) => x.name === p.name && x.ops.some((o) => s.ops.has(o)))
        if (!t) return { jsonrpc: "2.0", id: m.id, error: { code: -32602, message: `Unknown tool: ${p.name}` } }
        try {
          const r = await this.backend.call(s.policy, t.name, p.arguments ?? {})
          const text = JSON.stringify(r)
          const out: Record<string, unknown> = { content: [{ type: "text", text }] }
          if (typeof r === "object" && r !== null && !Array.isArray(r)) out.structuredContent = r
          return ok(out)
        } catch (e) {
          const he = e instanceof HelmrError ? e : new HelmrError("unavailable", (e as Error).message)
          const env = { error: he.toBody() }
          return ok({ isError: true, content: [{ type: "text", text: JSON.stringify(env) }], structuredContent: env })
        }
      }
      default:
        return { jsonrpc: "2.0", id: m.id, error: { code: -32601, message: `Method not found: ${m.method}` } }
    }
  }

  /** Stops the server and forgets every scope. */
  close(): void {
    this.closed = true
    this.scopes.clear(); this.byToken.clear(); this.maxScope = undefined
    this.server?.close()
    this.server?.closeAllConnections?.()
  }
}

interface Rpc { jsonrpc?: string; id?: string | number | null; method?: string; params?: unknown }

function hash(s: string): string {
  return createHash("sha256").update(s).digest("hex")
}
