// `MemwriteClient`: the memwrite HTTP API over openapi-fetch, typed by the generated schema
// (src/schema.d.ts, from functions/openapi.json). Same operations and semantics as the Python
// client (docs/client.md): camelCase fields, one error class per error code, retries.

import createClient, { type Client } from "openapi-fetch";

import { type Camelize, camelize, snakeize } from "./case.js";
import { errorFor, MemwriteApiError, TraceNotFinished } from "./errors.js";
import { DEFAULT_RETRY, parseRetryAfter, type RetryPolicy, retryingFetch } from "./retry.js";
import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];
export type IngestAck = Camelize<Schemas["IngestResponse"]>;
export type DirectWriteAck = Camelize<Schemas["DirectWriteAccepted"]>;
export type Trace = Camelize<Schemas["TraceView"]>;
export type SearchHit = Camelize<Schemas["SearchResults"]["results"][number]>;
export type Memory = Camelize<Schemas["ListedMemory"]>;
export type PatchedMemory = Camelize<Schemas["MemoryView"]>;
export type MemoryDetail = Camelize<Schemas["MemoryDetailView"]>;
export type MemoryTraces = Camelize<Schemas["MemoryTraces"]>;
export type DeletionRecord = Camelize<Schemas["DeletionRecord"]>;
export type Episode = Camelize<Schemas["EpisodeView"]>;
export type RollbackRecord = Camelize<Schemas["RollbackRecord"]>;
export type ErasureReport = Camelize<Schemas["ErasureReport"]>;
export type ImportReport = Camelize<Schemas["ImportReport"]>;
export type BackfillAccepted = Camelize<Schemas["BackfillAccepted"]>;
export type UsageReport = Camelize<Schemas["UsageReport"]>;
/** Settings and replay configs are the API's documents, keys as the configuration reference
 * spells them (snake_case): they round-trip unchanged. */
export type TenantSettings = Schemas["TenantOverrides-Output"];
export type TenantSettingsInput = Schemas["TenantOverrides-Input"];
export type ReplayDiff = Schemas["ReplayDiff"];
export type BatchReplay = Schemas["BatchReplay"];

export type Role = "user" | "assistant" | "system" | "tool";
export interface Turn {
  role: Role;
  content: string;
  turnId?: string;
  timestamp?: string;
  inReplyTo?: string;
}

export interface MemwriteClientOptions {
  /** e.g. http://127.0.0.1:8080 (`memwrite serve`) or the API Gateway stage URL. */
  baseUrl: string;
  /** Sent as `x-api-key`; `MEMWRITE_API_KEY` when not given. */
  apiKey?: string;
  retry?: Partial<RetryPolicy>;
  /** Replaces the network (tests); the global `fetch` when not given. */
  fetch?: (request: Request) => Promise<Response>;
}

export interface AddInput {
  userId: string;
  sessionId: string;
  turns: Turn[];
  agentId?: string;
  source?: string;
  /** One per logical call, kept across its retries (a fresh UUID when not given). */
  idempotencyKey?: string;
}

export interface SearchInput {
  userId: string;
  query: string;
  k?: number;
  types?: string[];
  topics?: string[];
  tiers?: string[];
  minConfidence?: number;
  asOf?: string;
  /** "memory" and/or "episode" (both when not given). */
  kinds?: string[];
}

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
}

const NDJSON = "application/x-ndjson";
const PAGE_SIZE = 100;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/** The memwrite API: `const mw = new MemwriteClient({ baseUrl, apiKey })`. Connection errors,
 * 429 and 503 are retried (`retry`); every other refusal throws its error class at once. */
export class MemwriteClient {
  readonly retry: RetryPolicy;
  private readonly api: Client<paths>;
  private readonly send: (request: Request) => Promise<Response>;
  private readonly once: (request: Request) => Promise<Response>;

  constructor(options: MemwriteClientOptions) {
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    const key = options.apiKey ?? process.env.MEMWRITE_API_KEY;
    const network = options.fetch ?? ((request: Request) => globalThis.fetch(request));
    this.send = retryingFetch(this.retry, true, network);
    // Not repeatable (delete, rollback): a second one would be refused, not a no-op.
    this.once = retryingFetch(this.retry, false, network);
    this.api = createClient<paths>({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      headers: { Accept: "application/json", ...(key ? { "x-api-key": key } : {}) },
      fetch: this.send,
    });
  }

  /** Ingest turns (`POST /v1/turns`); follow the returned `traceId` with `wait`. */
  async add(input: AddInput): Promise<IngestAck> {
    const body = snakeize({
      userId: input.userId,
      sessionId: input.sessionId,
      agentId: input.agentId,
      source: input.source,
      turns: input.turns,
    }) as Schemas["IngestRequest"];
    const idempotencyKey = input.idempotencyKey ?? crypto.randomUUID();
    return camelize(
      ok(
        await this.api.POST("/v1/turns", {
          body,
          headers: { "Idempotency-Key": idempotencyKey },
        }),
      ),
    );
  }

  /** Write memories as they are (`type`, `attribute`, `value`, optional `entity`, `text`,
   * `observedAt`, `pinned`, `expiresAt`): no extraction; follow the trace. */
  async addMemories(
    userId: string,
    memories: Record<string, unknown>[],
    options: { idempotencyKey?: string } = {},
  ): Promise<DirectWriteAck> {
    const body = snakeize({ memories }) as Schemas["DirectMemoriesRequest"];
    const answer = await this.api.POST("/v1/users/{user_id}/memories", {
      params: { path: { user_id: userId } },
      body,
      headers: { "Idempotency-Key": options.idempotencyKey ?? crypto.randomUUID() },
    });
    return camelize(ok(answer));
  }

  async trace(traceId: string): Promise<Trace> {
    const answer = await this.api.GET("/v1/traces/{trace_id}", {
      params: { path: { trace_id: traceId } },
    });
    return camelize(ok(answer));
  }

  /** Poll the trace until it is complete or failed; `TraceNotFinished` after `timeoutMs`. */
  async wait(traceId: string, options: WaitOptions = {}): Promise<Trace> {
    const timeoutMs = options.timeoutMs ?? 30_000;
    let intervalMs = options.intervalMs ?? 250;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const current = await this.trace(traceId);
      if (current.status === "complete" || current.status === "failed") return current;
      if (Date.now() >= deadline) throw new TraceNotFinished(traceId, timeoutMs, current);
      await sleep(Math.min(intervalMs, Math.max(0, deadline - Date.now())));
      intervalMs = Math.min(intervalMs * 1.5, 2_000);
    }
  }

  /** A user's memories (and kept episodes) best matching `query`, best first. */
  async search(input: SearchInput): Promise<SearchHit[]> {
    const body = snakeize({ k: 10, ...input }) as Schemas["SearchRequest"];
    return camelize(ok(await this.api.POST("/v1/search", { body }))).results;
  }

  /** One memory with its supersession chain. */
  async getMemory(memoryId: string): Promise<MemoryDetail> {
    const answer = await this.api.GET("/v1/memories/{memory_id}", {
      params: { path: { memory_id: memoryId } },
    });
    return camelize(ok(answer));
  }

  /** Pin or unpin a memory, or set (null: remove) its expiry; a field left out stays. */
  async patchMemory(
    memoryId: string,
    patch: { pinned?: boolean; expiresAt?: string | null },
  ): Promise<PatchedMemory> {
    const answer = await this.api.PATCH("/v1/memories/{memory_id}", {
      params: { path: { memory_id: memoryId } },
      body: snakeize(patch) as Schemas["MemoryPatch"],
    });
    return camelize(ok(answer));
  }

  /** Delete one memory; what it had superseded is current again (`restored`). */
  async deleteMemory(memoryId: string): Promise<DeletionRecord> {
    const answer = await this.api.DELETE("/v1/memories/{memory_id}", {
      params: { path: { memory_id: memoryId } },
      fetch: this.once,
    });
    return camelize(ok(answer));
  }

  /** The traces that stored or merged into a memory (why it exists). */
  async memoryTraces(memoryId: string): Promise<MemoryTraces> {
    const answer = await this.api.GET("/v1/memories/{memory_id}/traces", {
      params: { path: { memory_id: memoryId } },
    });
    return camelize(ok(answer));
  }

  /** Every memory of the user, page after page as the iteration goes. */
  async *memories(userId: string, options: { pageSize?: number } = {}): AsyncGenerator<Memory> {
    let cursor: string | undefined;
    do {
      const answer = await this.api.GET("/v1/users/{user_id}/memories", {
        params: { path: { user_id: userId }, query: { limit: options.pageSize ?? PAGE_SIZE, cursor } },
      });
      const page = camelize(ok(answer));
      yield* page.memories;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** The user's traces, newest first, every page (`since`/`until`: ISO 8601). */
  async *traces(
    userId: string,
    options: { since?: string; until?: string; pageSize?: number } = {},
  ): AsyncGenerator<Trace> {
    let cursor: string | undefined;
    do {
      const query = {
        limit: options.pageSize ?? 50,
        cursor,
        from: options.since,
        to: options.until,
      };
      const answer = await this.api.GET("/v1/users/{user_id}/traces", {
        params: { path: { user_id: userId }, query },
      });
      const page = camelize(ok(answer));
      yield* page.traces;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** The user's episodes (kept turns), oldest first, every page. */
  async *episodes(
    userId: string,
    options: { status?: Schemas["EpisodeStatus"]; since?: string; until?: string; pageSize?: number } = {},
  ): AsyncGenerator<Episode> {
    let cursor: string | undefined;
    do {
      const query = {
        limit: options.pageSize ?? 50,
        cursor,
        status: options.status,
        since: options.since,
        until: options.until,
      };
      const answer = await this.api.GET("/v1/users/{user_id}/episodes", {
        params: { path: { user_id: userId }, query },
      });
      const page = camelize(ok(answer));
      yield* page.episodes;
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined);
  }

  /** Hand the user's pending episodes to the backfill (202): `traceId` to `wait` for, or null
   * when nothing was pending. */
  async backfill(userId: string, options: { since?: string; until?: string } = {}): Promise<BackfillAccepted> {
    const answer = await this.api.POST("/v1/users/{user_id}/backfill", {
      params: { path: { user_id: userId } },
      body: options,
    });
    return camelize(ok(answer));
  }

  /** What a changed pipeline config would have made of a trace (nothing is written). */
  async replay(traceId: string, config: Record<string, unknown> = {}): Promise<ReplayDiff> {
    const answer = await this.api.POST("/v1/traces/{trace_id}/replay", {
      params: { path: { trace_id: traceId } },
      body: { config },
    });
    return ok(answer);
  }

  /** Remove exactly what a trace produced, restoring what it superseded. */
  async rollback(traceId: string): Promise<RollbackRecord> {
    const answer = await this.api.POST("/v1/traces/{trace_id}/rollback", {
      params: { path: { trace_id: traceId } },
      fetch: this.once,
    });
    return camelize(ok(answer));
  }

  /** The tenant's own settings (the credential's tenant). */
  async settings(): Promise<TenantSettings> {
    return ok(await this.api.GET("/v1/settings", {}));
  }

  /** The tenant's usage (`GET /v1/usage`): turns in and kept, model calls, tokens, embeddings
   * and cost over the UTC hours from `since` through `until` (ISO 8601; a date: its whole
   * day; defaults: this month's first day, now). */
  async usage(options: { since?: string; until?: string } = {}): Promise<UsageReport> {
    const query = { from: options.since, to: options.until };
    return camelize(ok(await this.api.GET("/v1/usage", { params: { query } })));
  }

  /** Replace the tenant's own settings whole (`extraction`, `webhooks`, skip patterns...). */
  async putSettings(settings: TenantSettingsInput): Promise<TenantSettings> {
    return ok(await this.api.PUT("/v1/settings", { body: settings }));
  }

  /** Erase everything of a user, index included. */
  async eraseUser(userId: string): Promise<ErasureReport> {
    const answer = await this.api.DELETE("/v1/users/{user_id}/memories", {
      params: { path: { user_id: userId } },
    });
    return camelize(ok(answer));
  }

  /** The user's export: JSON lines (`importUser` takes them back). A large one is fetched
   * from the URL the API answers with (a 303), without the API key. */
  async exportUser(userId: string): Promise<string> {
    const answer = await this.api.GET("/v1/users/{user_id}/export", {
      params: { path: { user_id: userId } },
      headers: { Accept: NDJSON },
      parseAs: "text",
      redirect: "manual",
    });
    const location = answer.response.headers.get("location");
    if (answer.response.status === 303 && location) {
      const download = await this.send(new Request(location, { headers: { Accept: NDJSON } }));
      const text = await download.text();
      if (!download.ok) throw errorFor(download.status, { message: text.slice(0, 500) });
      return text;
    }
    return ok(answer as Answer<string>);
  }

  /** Restore an export of the user, same ids; a repeat changes nothing. */
  async importUser(userId: string, lines: string): Promise<ImportReport> {
    const answer = await this.api.POST("/v1/users/{user_id}/import", {
      params: { path: { user_id: userId } },
      body: lines,
      bodySerializer: (text: string) => text,
      headers: { "Content-Type": NDJSON },
    });
    return camelize(ok(answer));
  }

  /** The API's OpenAPI document. */
  async openapi(): Promise<Record<string, unknown>> {
    return ok(await this.api.GET("/v1/openapi.json", {})) as Record<string, unknown>;
  }
}

/** The data of a success, or the error class of the refusal. */
function ok<T>(answer: Answer<T>): T {
  const { response } = answer;
  if (response.ok && answer.data !== undefined) return answer.data;
  const retryAfterMs = parseRetryAfter(response.headers.get("Retry-After"));
  if (response.ok) throw new MemwriteApiError(response.status, { message: "empty answer" });
  const body = typeof answer.error === "string" ? { message: answer.error.slice(0, 500) } : answer.error;
  throw errorFor(response.status, body, retryAfterMs);
}
