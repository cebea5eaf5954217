import { agent } from "@helmr/sdk"
import { box } from "./box.js"

// Asks a choice question and returns the answer.
export const asker = agent({
  id: "asker",
  template: box,
  async turn(turn) {
    const a = await turn.ask({
      prompt: "Ship it?",
      answer: {
        type: "choice",
        options: [
          { id: "yes", label: "Yes", value: true },
          { id: "no", label: "No", value: false },
        ],
      },
    })
    return { selected: a.answer.selected.map((o) => o.id), by: a.respondedBy.kind }
  },
})
