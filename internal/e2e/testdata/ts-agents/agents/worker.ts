import { agent } from "@helmr/sdk"
import { z } from "zod"
import { box } from "./box.js"

// The specification's typed-invocation worker: accepts { issue: number }.
export const worker = agent({
  id: "worker",
  template: box,
  inputSchema: z.object({ issue: z.number().int() }),
  resultSchema: z.object({ issue: z.number(), title: z.string() }),
  async turn(turn) {
    await turn.output.write(`working on issue ${turn.input.issue}\n`)
    return { issue: turn.input.issue, title: `Issue #${turn.input.issue}` }
  },
})
