import { agent, MessageRejected } from "@helmr/sdk"
import { box } from "./box.js"

// onMessage: "bad" is rejected with MessageRejected (the Turn goes on);
// "stop" ends the Turn with every message it accepted.
export const chat = agent({
  id: "chat",
  template: box,
  async turn(turn) {
    const got: string[] = []
    let stop!: () => void
    const stopped = new Promise<void>((r) => (stop = r))
    await turn.onMessage(async (m) => {
      const text = m.content.map((p) => (p.type === "text" ? p.text : "")).join("")
      if (text === "bad") throw new MessageRejected("bad is not welcome here")
      got.push(text)
      await turn.output.write(`heard ${text}\n`)
      if (text === "stop") stop()
    })
    await turn.output.write("listening\n")
    await stopped
    return { got }
  },
})
