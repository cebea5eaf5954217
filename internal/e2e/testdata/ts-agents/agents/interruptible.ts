import { agent } from "@helmr/sdk"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { box } from "./box.js"

const marker = () => path.join(process.env.HELMR_WORKSPACE ?? process.cwd(), "cleaned-up")

// "wait" blocks until interrupted; its onCancel callback leaves a marker in
// the workspace. "check" reports whether the marker is there (the same
// process serves the next Turn).
export const interruptible = agent({
  id: "interruptible",
  template: box,
  async turn(turn) {
    const cmd = turn.input.map((p) => (p.type === "text" ? p.text : "")).join("").trim()
    if (cmd === "check") {
      const cleaned = await fs.readFile(marker(), "utf8").catch(() => "")
      return { cleaned, pid: process.pid }
    }
    turn.onCancel(async (reason) => {
      await fs.writeFile(marker(), String((reason as { code?: string })?.code ?? reason))
    })
    await turn.output.write("waiting to be interrupted\n")
    await new Promise((_, reject) => turn.signal.addEventListener("abort", () => reject(turn.signal.reason), { once: true }))
    return { unreachable: true, pid: process.pid }
  },
})
