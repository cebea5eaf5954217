import { agent, tokens } from "@helmr/sdk"
import { z } from "zod"
import { box } from "./box.js"

// Creates a Token, writes where to complete it (as JSON output), and waits
// for a completion that validates.
export const tokened = agent({
  id: "tokened",
  template: box,
  async turn(turn) {
    const token = await tokens.create({ timeout: "1h" })
    await turn.output.write([{ type: "json", value: { callbackUrl: token.callbackUrl, publicAccessToken: token.publicAccessToken } }])
    const r = await token.wait({ schema: z.object({ approved: z.boolean() }) })
    return { approved: r.unwrap().approved, tokenId: token.id }
  },
})
