/** Durations as Helmr writes them: `500ms`, `30s`, `15m`, `2h`, `7d`, sums (`1h30m`), decimals (`1.5h`). */
export type Duration = `${number}${"ms" | "s" | "m" | "h" | "d"}${string}`
/** A Duration or `"never"`. */
export type Retention = Duration | "never"

const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** Parses a Duration into milliseconds; throws a TypeError for anything else. */
export function parseDuration(s: string): number {
  if (typeof s !== "string" || s === "") throw new TypeError("empty duration")
  let total = 0
  const re = /(\d*)(?:\.(\d*))?(ms|s|m|h|d)/y
  let i = 0
  while (i < s.length) {
    re.lastIndex = i
    const m = re.exec(s)
    if (!m || (m[1] === "" && (m[2] === undefined || m[2] === ""))) {
      throw new TypeError(`duration ${JSON.stringify(s)}: want a number followed by ms, s, m, h or d`)
    }
    total += Number(`${m[1] || "0"}.${m[2] || "0"}`) * units[m[3]]
    i = re.lastIndex
  }
  if (!(total > 0) || !Number.isFinite(total)) throw new TypeError(`duration ${JSON.stringify(s)} must be positive`)
  return total
}

/** Checks a Retention (a Duration or "never"). */
export function checkRetention(s: string, field: string): void {
  if (s === "never") return
  try {
    parseDuration(s)
  } catch (e) {
    throw new TypeError(`${field}: ${(e as Error).message}`)
  }
}
