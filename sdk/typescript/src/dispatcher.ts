/**
 * Loopback HTTP without inactivity timeouts: in the managed runtime, fetch()
 * requests to loopback (localhost, 127.0.0.0/8, ::1) go through an undici
 * Agent with no response-header and body timeouts, so local services (a
 * native harness's server, say) may stream or think for long. Connection
 * establishment stays bounded; other origins, caller AbortSignals and an
 * explicit `dispatcher` option keep their behaviour.
 */
const globalDispatcher = Symbol.for("undici.globalDispatcher.1")

interface Dispatcher { dispatch(opts: { origin?: string | URL }, handler: unknown): boolean }

/** Reports whether an origin is a loopback address. */
export function isLoopbackOrigin(origin: string | URL | undefined): boolean {
  if (!origin) return false
  let host: string
  try {
    host = (typeof origin === "string" ? new URL(origin) : origin).hostname
  } catch {
    return false
  }
  host = host.replace(/^\[|\]$/g, "").toLowerCase()
  return host === "localhost" || host.endsWith(".localhost") || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)
}

/** Wraps the global fetch so that its first call routes loopback requests as described above. */
export function installLoopbackDispatcher(): void {
  const g = globalThis as unknown as Record<symbol | string, unknown>
  if (g.__helmrLoopbackFetch) return
  const original = globalThis.fetch
  if (typeof original !== "function") return
  let ready: Promise<void> | undefined
  const install = async () => {
    // Node loads its undici, and with it the global dispatcher, on the first fetch.
    try { await (await original("data:,")).arrayBuffer() } catch { /* no dispatcher: nothing to route */ }
    const base = g[globalDispatcher] as (Dispatcher & { constructor: new (o: object) => Dispatcher }) | undefined
    if (!base || typeof base.dispatch !== "function" || (base as unknown as { helmrLoopback?: unknown }).helmrLoopback) return
    const loopback = new base.constructor({ headersTimeout: 0, bodyTimeout: 0 })
    g[globalDispatcher] = new Proxy(base, {
      get(target, prop) {
        if (prop === "helmrLoopback") return loopback
        if (prop === "dispatch") return (opts: { origin?: string | URL }, handler: unknown) => (isLoopbackOrigin(opts?.origin) ? loopback : target).dispatch(opts, handler)
        const v = Reflect.get(target, prop, target)
        return typeof v === "function" ? v.bind(target) : v
      },
    })
  }
  const wrapped = async function fetch(input: Parameters<typeof original>[0], init?: Parameters<typeof original>[1]) {
    ready ??= install()
    await ready
    return original(input, init)
  }
  g.__helmrLoopbackFetch = true
  globalThis.fetch = wrapped as typeof fetch
}
