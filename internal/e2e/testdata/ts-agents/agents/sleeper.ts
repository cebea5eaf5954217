import { agent, timers } from "@helmr/sdk"
import { box } from "./box.js"

// Waits on a durable timer for the input's text (a Duration such as "2s"),
// hot for only 100ms: past it the process is suspended (frozen) until the
// timer fires.
export const sleeper = agent({
  id: "sleeper",
  template: box,
  async turn(turn) {
    const d = turn.input.map((p) => (p.type === "text" ? p.text : "")).join("").trim() || "1s"
    const started = Date.now()
    await timers.waitFor(d as "1s", { idleTimeout: "100ms" })
    return { waited: d, pid: process.pid, elapsedMs: Date.now() - started }
  },
})
