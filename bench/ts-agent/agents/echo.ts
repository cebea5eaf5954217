// The benchmark's TypeScript agent: a text Agent that writes one output
// fragment, responds and returns a small result, as bench/agent does in Go.
import { agent, template, image } from "@helmr/sdk"

const box = template({ id: "bench", image: image("bench").fromHost() })

export const echo = agent({
  id: "echo",
  template: box,
  async turn(turn) {
    await turn.output.write("ok ")
    await turn.respond(turn.input.map((p) => (p.type === "text" ? p.text : "")).join(""))
    return { seq: turn.sequence }
  },
})
