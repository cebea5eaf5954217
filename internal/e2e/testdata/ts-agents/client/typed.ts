// The specification's typed invocation, run against the control plane at
// HELMR_API_URL: it prints what it saw as one JSON line.
import { HelmrClient } from "@helmr/sdk"
import type { AgentInput, AgentResult } from "@helmr/sdk"
import type { worker } from "../agents/worker.js"

const client = new HelmrClient({ baseUrl: process.env.HELMR_API_URL!, apiKey: process.env.HELMR_API_KEY! })

const input: AgentInput<typeof worker> = { issue: 42 }
const started = await client.sessions.create<typeof worker>({
  agent: "worker",
  input, // checked against this Agent's schema input
})
const outcome = await started.turn.wait()
let title: string | null = null
if (outcome.status === "completed" && outcome.payloadExpiredAt === undefined) {
  const result: AgentResult<typeof worker> = outcome.result // inferred persisted result type
  title = result.title
}
console.log(JSON.stringify({ session: started.session.id, status: outcome.status, title }))
