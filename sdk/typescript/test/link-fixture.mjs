// Links this SDK into the fixture package's node_modules (as npm would link a
// dependency), so that tsc and the bundler resolve "@helmr/sdk" from it.
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
for (const pkg of ["pkg", "cron"]) {
  const link = path.join(root, "test", "fixtures", pkg, "node_modules", "@helmr", "sdk")
  if (!fs.existsSync(link)) {
    fs.mkdirSync(path.dirname(link), { recursive: true })
    fs.symlinkSync(path.relative(path.dirname(link), root), link)
  }
}
