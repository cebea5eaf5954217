// The benchmark's TypeScript agents, as bench/agent's in Go: echo, a text
// Agent that writes one output fragment, responds and returns a small
// result; and parker, for the parking phase, which asks a question with
// the idle timeout its input names (so that its process is parked while it
// waits) and writes output as soon as the answer arrives.
import { randomUUID } from "node:crypto"
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

// The parker's memory: a count of its Turns and a value drawn once per
// process. A process restored from its checkpoint keeps both; one started
// again would count from 1 under another boot.
let parks = 0
const boot = randomUUID()

export const parker = agent({
  id: "parker",
  template: box,
  async turn(turn) {
    const count = ++parks
    const idleTimeout = turn.input.map((p) => (p.type === "text" ? p.text : "")).join("")
    const a = await turn.ask({ prompt: "park", answer: { type: "text" } }, { idleTimeout })
    await turn.output.write("resumed ")
    return { count, boot, answer: a.answer }
  },
})
