import { actor } from "@helmr/sdk"
import { box } from "./box.js"

// An Actor: one loop receives the Session's Turns in order and counts them.
export const counter = actor({
  id: "counter",
  template: box,
  async run(session) {
    let n = 0
    for (;;) {
      const turn = await session.receive()
      if (turn === null) return
      n++
      await turn.output.write(`turn ${n}\n`)
      turn.complete({ count: n, pid: process.pid })
    }
  },
})
