/**
 * @helmr/sdk: define Agents (`agent`, `actor`, `template`, `image`), wait
 * durably (`timers`, `tokens`), fire on a schedule (`triggers`), and call Helmr (`HelmrClient`).
 */
export { agent, actor, isAgentDefinition } from "./agent.js"
export type {
  AgentConfig, ActorConfig, AgentDefinition, AgentContract, AgentInput, AgentResult, InitContext, AgentContext,
  ActorSession, ActorTurn, ComputerIdentity, RuntimeMcpConnectionOptions,
} from "./agent.js"
export { template, image, isTemplate, Image } from "./template.js"
export type { Template, TemplateConfig, Resources, ImageStep } from "./template.js"
export { MessageRejected } from "./turn.js"
export type {
  Turn, Message, MessageSource, InputSource, SlackInputSource, OutputReceipt, Question, ChoiceOption, ChoiceAnswer,
  AnswerFor, AskAnswer, Responder, MaybePromise,
} from "./turn.js"
export { timers, tokens } from "./waits.js"
export { triggers, isTrigger } from "./triggers.js"
export type { Trigger, CronTrigger, CronOptions, TriggerOverlap, TriggerManifest } from "./triggers.js"
export type { Token, TokenWaitResult, TokenWaitError, TokenWaitOptions, TokenCreateOptions, WaitOptions } from "./waits.js"
export { HelmrError } from "./errors.js"
export type { ErrorCode, ErrorBody } from "./errors.js"
export { limits } from "./content.js"
export type { Content, ContentPart, TextPart, JsonPart, InputContent, HumanContent, JsonValue } from "./content.js"
export type { Duration, Retention } from "./duration.js"
export type { RuntimeMcpPolicy, RuntimeMcpRule, RuntimeMcpTargetOperation } from "./policy.js"
export type { StandardSchemaV1 } from "@standard-schema/spec"
export { HelmrClient, APIError } from "./client/index.js"
export type * from "./client/types.js"
