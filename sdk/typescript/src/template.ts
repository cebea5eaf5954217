/** Templates and images: where a Session's Computer comes from (the Go SDK's template.go). */

const idPattern = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/
const brand = Symbol.for("helmr.sdk.Template")

/** One image build step, as in the manifest. */
export interface ImageStep { readonly op: "run" | "copy" | "workdir" | "env" | "user"; readonly args: readonly string[] }

/** An image: a base (`from(ref)` or `fromHost()`) plus build steps. Immutable: every method returns a new image. */
export class Image {
  readonly name: string
  readonly fromRef: string | undefined
  readonly host: boolean
  readonly steps: readonly ImageStep[]
  /** @internal */
  constructor(name: string, fromRef: string | undefined, host: boolean, steps: readonly ImageStep[]) {
    this.name = name; this.fromRef = fromRef; this.host = host; this.steps = Object.freeze([...steps])
    Object.freeze(this)
  }
  /** Bases the image on an OCI image reference, e.g. `node:24-bookworm-slim`. */
  from(ref: string): Image {
    if (typeof ref !== "string" || ref.trim() === "") throw new TypeError(`image(${JSON.stringify(this.name)}).from: ref must be a non-empty string`)
    return new Image(this.name, ref, false, this.steps)
  }
  /** Bases the image on the host's own system, read-only (offline development; Go: `FromHost()`). */
  fromHost(): Image { return new Image(this.name, undefined, true, this.steps) }
  /** Runs a command while building (`argv`, no shell). */
  run(...argv: string[]): Image { return this.step("run", argv, 1) }
  /** Copies `source` (relative to the agent package) to `dst` in the image. */
  copy(dst: string, source: string): Image { return this.step("copy", [dst, source], 2) }
  /** Sets the working directory of later steps and processes. */
  workdir(dir: string): Image { return this.step("workdir", [dir], 1) }
  /** Sets an environment variable. */
  env(name: string, value: string): Image { return this.step("env", [name, value], 2) }
  /** Sets the user of later steps and processes. */
  user(user: string): Image { return this.step("user", [user], 1) }
  private step(op: ImageStep["op"], args: string[], min: number): Image {
    if (args.length < min || args.some((a) => typeof a !== "string")) throw new TypeError(`image(${JSON.stringify(this.name)}).${op}: give ${min === 1 ? "a string" : `${min} strings`}`)
    return new Image(this.name, this.fromRef, this.host, [...this.steps, Object.freeze({ op, args: Object.freeze([...args]) })])
  }
  /** @internal */
  toManifest(): Record<string, unknown> {
    const m: Record<string, unknown> = { name: this.name }
    if (this.fromRef) m.from = this.fromRef
    if (this.host) m.host = true
    if (this.steps.length) m.steps = this.steps.map((s) => ({ op: s.op, args: [...s.args] }))
    return m
  }
}

/** Starts an image named `id`; give it a base with `.from(ref)` or `.fromHost()`. */
export function image(id: string): Image {
  if (typeof id !== "string" || id.trim() === "") throw new TypeError("image: id must be a non-empty string")
  return new Image(id, undefined, false, [])
}

/** Computer resources. `memory` like `"1GiB"`, `"512MiB"`. */
export interface Resources { readonly cpu?: number; readonly memory?: string }

export interface TemplateConfig<Id extends string = string> {
  readonly id: Id
  readonly image: Image
  readonly resources?: Resources
  /** Outbound network for the Computer (its own namespace). Default false. */
  readonly network?: boolean
}

/** A frozen Template definition (`kind: "template"`). */
export interface Template<Id extends string = string> {
  readonly kind: "template"
  readonly id: Id
  readonly image: Image
  readonly resources: Resources
  readonly network: boolean
}

const memoryPattern = /^(\d+(?:\.\d+)?)(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB|K|M|G|T)?$/

/** Defines a Template: the image and resources of the Computers Sessions run on. Throws TypeError on bad config. */
export function template<const Id extends string>(config: TemplateConfig<Id>): Template<Id> {
  if (typeof config !== "object" || config === null) throw new TypeError("template: config must be an object")
  if (typeof config.id !== "string" || !idPattern.test(config.id)) throw new TypeError(`template: id ${JSON.stringify(config.id)} must match ${idPattern}`)
  if (typeof config.image !== "object" || config.image === null || typeof (config.image as Image).toManifest !== "function") throw new TypeError(`template ${JSON.stringify(config.id)}: image must be an image(...) definition`)
  if (!config.image.fromRef && !config.image.host) throw new TypeError(`template ${JSON.stringify(config.id)}: the image needs .from(ref) or .fromHost()`)
  const r = config.resources ?? {}
  if (r.cpu !== undefined && (typeof r.cpu !== "number" || !(r.cpu >= 0))) throw new TypeError(`template ${JSON.stringify(config.id)}: resources.cpu must be a non-negative number`)
  if (r.memory !== undefined && (typeof r.memory !== "string" || !memoryPattern.test(r.memory))) throw new TypeError(`template ${JSON.stringify(config.id)}: resources.memory ${JSON.stringify(r.memory)} must be like "512MiB" or "1GiB"`)
  const t = { kind: "template" as const, id: config.id, image: config.image, resources: Object.freeze({ ...r }), network: config.network === true }
  Object.defineProperty(t, brand, { value: true })
  return Object.freeze(t)
}

/** Reports whether v is a template() definition (also from another copy of the SDK). */
export function isTemplate(v: unknown): v is Template {
  return typeof v === "object" && v !== null && (v as Record<symbol, unknown>)[brand] === true && (v as Template).kind === "template"
}

/** @internal The manifest entry of a Template. */
export function templateManifest(t: Template): Record<string, unknown> {
  const res: Record<string, unknown> = { cpu: t.resources.cpu ?? 0 }
  if (t.resources.memory) res.memory = t.resources.memory
  const m: Record<string, unknown> = { id: t.id, image: t.image.toManifest(), resources: res }
  if (t.network) m.network = true
  return m
}
