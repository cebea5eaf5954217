/**
 * The first import of a bundle's entry: takes the session credential out of
 * the environment (and closes its descriptor) before any agent module runs,
 * so module-level code and the child processes it starts never see it.
 */
import { takeSessionTokenEarly } from "./runtime.js"

takeSessionTokenEarly()
