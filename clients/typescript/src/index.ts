export * from "./client.js";
export * from "./errors.js";
export {
  DEFAULT_RETRY,
  parseRetryAfter,
  type RetryPolicy,
  retryDelayMs,
} from "./retry.js";
export { SIGNATURE_HEADER, signWebhook, verifyWebhookSignature } from "./webhooks.js";
export type { Camelize } from "./case.js";
