import { agent } from "@helmr/sdk"
import { readFileSync, writeFileSync } from "node:fs"
import { box } from "./box.js"

// Counts its Turns in memory, writes a stamp it keeps in memory only and a
// file in /workspace, then asks, hot for only 50ms (an hour with the input
// "hot"): past it the process is parked (checkpointed to disk and ended)
// until the answer restores it. The result shows what it still had.
let asked = 0

export const parker = agent({
  id: "parker",
  template: box,
  async turn(turn) {
    const count = ++asked
    const stamp = `${process.hrtime.bigint()}-${Math.random()}`
    writeFileSync("/workspace/asked", String(count))
    await turn.output.write(`stamp ${stamp}\n`)
    const hot = turn.input.map((p) => (p.type === "text" ? p.text : "")).join("").trim() === "hot"
    const a = await turn.ask({ prompt: "Go on?", answer: { type: "text" } }, { idleTimeout: hot ? "1h" : "50ms" })
    return { count, stamp, file: readFileSync("/workspace/asked", "utf8"), answer: a.answer }
  },
})
