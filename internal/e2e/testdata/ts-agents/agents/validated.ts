import { agent } from "@helmr/sdk"
import { z } from "zod"
import { box } from "./box.js"

// A zod schema with an asynchronous transform: turn.input is its output.
const input = z
  .object({ n: z.number(), word: z.string().min(1) })
  .transform(async (v) => {
    await new Promise((r) => setTimeout(r, 10))
    return { doubled: v.n * 2, shout: v.word.toUpperCase() }
  })

export const validated = agent({
  id: "validated",
  template: box,
  inputSchema: input,
  resultSchema: z.object({ doubled: z.number(), shout: z.string(), transformed: z.literal(true) }),
  async turn(turn) {
    return { doubled: turn.input.doubled, shout: turn.input.shout, transformed: true as const }
  },
})
