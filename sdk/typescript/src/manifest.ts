/** The manifest a bundle prints with `--helmr-manifest` (helmrtype/manifest.go). */
import type { AgentDefinition } from "./agent.js"
import { isAgentDefinition } from "./agent.js"
import { checkPolicy } from "./policy.js"
import { jsonSchemaOf } from "./schema.js"
import { templateManifest } from "./template.js"
import type { Template } from "./template.js"

export const manifestVersion = "helmr.manifest.v1"

export interface Manifest {
  version: string
  sdk: "typescript"
  runtime: "node"
  agents: Record<string, unknown>[]
  templates: Record<string, unknown>[]
}

/** Builds the manifest of a set of definitions; throws on duplicates, clashing templates or bad policies. */
export function buildManifest(defs: readonly AgentDefinition[]): Manifest {
  if (defs.length === 0) throw new Error("no agents given")
  const agents: Record<string, unknown>[] = []
  const seen = new Set<string>()
  const templates = new Map<string, { t: Template; json: string }>()
  for (const d of defs) {
    if (!isAgentDefinition(d)) throw new TypeError("buildManifest: every entry must be an agent() definition")
    if (seen.has(d.id)) throw new Error(`agent ${JSON.stringify(d.id)} is declared twice`)
    seen.add(d.id)
    const m: Record<string, unknown> = { id: d.id, template: d.template.id, input_kind: d.inputSchema ? "json" : "text" }
    if (d.inputSchema) m.input_schema = jsonSchemaOf(d.inputSchema, "input")
    if (d.resultSchema) m.result_schema = jsonSchemaOf(d.resultSchema, "output")
    m.close_after_idle = d.closeAfterIdle
    m.hibernate_after_idle = d.hibernateAfterIdle
    if (d.maxTurnDuration) m.max_turn_duration = d.maxTurnDuration
    if (d.runtimeMcp) m.runtime_mcp = d.runtimeMcp
    m.has_init = typeof d.init === "function"
    if (d.actor) m.actor = true
    if (d.idleTimeout) m.idle_timeout = d.idleTimeout
    if (d.triggers && d.triggers.length > 0) {
      m.triggers = d.triggers.map((t) => ({ name: t.name, kind: t.kind, pattern: t.pattern, timezone: t.timezone, input: t.input, overlap: t.overlap }))
    }
    agents.push(m)
    const tm = templateManifest(d.template)
    const json = JSON.stringify(tm)
    const prev = templates.get(d.template.id)
    if (prev && prev.json !== json) throw new Error(`two different templates have the id ${JSON.stringify(d.template.id)}`)
    templates.set(d.template.id, { t: d.template, json })
  }
  for (const d of defs) if (d.runtimeMcp) checkPolicy(d.runtimeMcp, seen)
  const ids = [...templates.keys()].sort()
  return { version: manifestVersion, sdk: "typescript", runtime: "node", agents, templates: ids.map((id) => JSON.parse(templates.get(id)!.json)) }
}
