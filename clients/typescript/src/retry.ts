// When and how long the client waits before trying a request again (docs/client.md "Retries").
// Retried: connection errors and 429 / 503 answers, the only refusals that say "later". The
// wait is exponential backoff with full jitter, never shorter than the server's Retry-After.
// A request that may have reached the server (a reset, a timeout) is repeated only when that
// is safe: reads, and writes that carry an Idempotency-Key.

import { ServiceUnreachable } from "./errors.js";

export const RETRYABLE_STATUSES: ReadonlySet<number> = new Set([429, 503]);
/** A larger Retry-After is not waited out: the error is thrown. */
export const MAX_RETRY_AFTER_MS = 60_000;
// A connection that never opened: always safe to try again.
const NEVER_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]);

export interface RetryPolicy {
  /** Attempts in all (1 = never retry). */
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** A number in [0, 1); Math.random unless given (tests). */
  random?: () => number;
}

export const DEFAULT_RETRY: RetryPolicy = { attempts: 4, baseDelayMs: 250, maxDelayMs: 8_000 };

/** Milliseconds to wait before attempt `attempt + 1` (`attempt` counts from 0). */
export function retryDelayMs(policy: RetryPolicy, attempt: number, retryAfterMs?: number): number {
  const random = policy.random ?? Math.random;
  if (retryAfterMs !== undefined) {
    // The server named its time: wait that, plus a little jitter so clients spread out.
    return retryAfterMs + random() * policy.baseDelayMs;
  }
  return random() * Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
}

/** `Retry-After` in milliseconds: delta-seconds or an HTTP date (RFC 9110 10.2.3). */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (!value) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const when = Date.parse(text);
  return Number.isNaN(when) ? undefined : Math.max(0, when - now);
}

function neverSent(error: unknown): boolean {
  const cause = (error as { cause?: { code?: string } }).cause;
  return cause?.code !== undefined && NEVER_SENT.has(cause.code);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A `fetch` that retries as `policy` says; `repeatable`: sending the request twice does what
 * sending it once does. Throws `ServiceUnreachable` when no answer came back. */
export function retryingFetch(
  policy: RetryPolicy,
  repeatable: boolean,
  send: (request: Request) => Promise<Response> = globalThis.fetch,
): (request: Request) => Promise<Response> {
  return async (request) => {
    for (let attempt = 0; ; attempt++) {
      const last = attempt + 1 >= policy.attempts;
      let response: Response;
      try {
        response = await send(request.clone());
      } catch (error) {
        if (last || !(repeatable || neverSent(error))) {
          const why = (error as { cause?: Error }).cause?.message ?? String(error);
          throw new ServiceUnreachable(`${request.method} ${request.url}: ${why}`, {
            cause: error,
          });
        }
        await sleep(retryDelayMs(policy, attempt));
        continue;
      }
      const retryAfterMs = parseRetryAfter(response.headers.get("Retry-After"));
      const retries =
        RETRYABLE_STATUSES.has(response.status) &&
        (retryAfterMs === undefined || retryAfterMs <= MAX_RETRY_AFTER_MS);
      if (last || !retries) return response;
      await response.body?.cancel();
      await sleep(retryDelayMs(policy, attempt, retryAfterMs));
    }
  };
}
