/** Runtime MCP policies: the authoring-time check of helmrtype/mcppolicy.go (the server checks again). */
import { HelmrError } from "./errors.js"

export type RuntimeMcpTargetOperation =
  | "enqueue" | "send_turn" | "inspect_session" | "inspect_turn"
  | "interrupt_turn" | "interrupt_session" | "resume_session"
  | "close_session" | "cancel_session"

export type RuntimeMcpRule =
  | { readonly operation: "start" | "spawn"; readonly agents: readonly string[]; readonly computer?: "new" | "caller" }
  | { readonly operation: RuntimeMcpTargetOperation; readonly agents: readonly string[]; readonly computer?: never }
  | { readonly operation: "list_computers"; readonly agents?: never; readonly computer?: never }

export interface RuntimeMcpPolicy { readonly allow: readonly RuntimeMcpRule[] }

const creation = new Set(["start", "spawn"])
const target = new Set(["enqueue", "send_turn", "inspect_session", "inspect_turn", "interrupt_turn", "interrupt_session", "resume_session", "close_session", "cancel_session"])

/** Checks a policy's form; throws HelmrError policy_invalid. Agent keys are checked against the manifest when `agents` is given. */
export function checkPolicy(p: unknown, agents?: ReadonlySet<string>): RuntimeMcpPolicy {
  const bad = (m: string): never => { throw new HelmrError("policy_invalid", m) }
  if (typeof p !== "object" || p === null || Array.isArray(p)) bad(`a runtime MCP policy is an object {allow: [...]}, not ${p === null ? "null" : Array.isArray(p) ? "an array" : typeof p}`)
  const obj = p as Record<string, unknown>
  for (const k of Object.keys(obj)) if (k !== "allow") bad(`a runtime MCP policy has only the field allow, not ${JSON.stringify(k)}`)
  if (!Array.isArray(obj.allow)) bad("a runtime MCP policy needs allow: an array of rules")
  const allow = obj.allow as unknown[]
  if (allow.length > 256) bad(`allow has ${allow.length} rules; the limit is 256`)
  allow.forEach((r, i) => {
    const at = `allow[${i}]`
    if (typeof r !== "object" || r === null || Array.isArray(r)) bad(`${at} must be an object`)
    const rule = r as Record<string, unknown>
    for (const k of Object.keys(rule)) if (!["operation", "agents", "computer"].includes(k)) bad(`${at} has an unknown field ${JSON.stringify(k)}`)
    const op = rule.operation
    if (typeof op !== "string") bad(`${at}.operation must be a string`)
    if (op === "list_computers") {
      if (rule.agents !== undefined) bad(`${at}: list_computers takes no agents`)
      if (rule.computer !== undefined) bad(`${at}: list_computers takes no computer`)
      return
    }
    if (!creation.has(op as string) && !target.has(op as string)) bad(`${at}.operation ${JSON.stringify(op)} is not a runtime MCP operation`)
    if (rule.computer !== undefined) {
      if (!creation.has(op as string)) bad(`${at}: computer is only for start and spawn`)
      if (rule.computer !== "new" && rule.computer !== "caller") bad(`${at}.computer must be "new" or "caller"`)
    }
    const as = rule.agents
    if (!Array.isArray(as) || as.length === 0 || as.length > 256) bad(`${at}.agents must list 1 to 256 Agent keys`)
    const seen = new Set<string>()
    for (const a of as as unknown[]) {
      if (typeof a !== "string" || a === "") bad(`${at}.agents: an Agent key is a non-empty string`)
      if (seen.has(a as string)) bad(`${at}.agents names ${JSON.stringify(a)} twice`)
      seen.add(a as string)
      if (agents && !agents.has(a as string)) bad(`${at}.agents names ${JSON.stringify(a)}, which is not an Agent of this manifest`)
    }
  })
  return p as RuntimeMcpPolicy
}
