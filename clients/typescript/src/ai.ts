// Vercel AI SDK tools over memwrite: `remember`, `recall` and `forget` for one user, answering
// in words the model can act on (the same answers as the Python tools, memwrite.integrations).
// Whose memories these are is fixed when the tools are made, never a tool argument: a model
// could be talked into naming another user. `import { memwriteTools } from "memwrite/ai"`.

import { tool } from "ai";
import { z } from "zod";

import type { IngestAck, MemwriteClient, SearchHit, Trace } from "./client.js";
import { NotFound, TraceNotFinished } from "./errors.js";

export const WAIT_MS = 20_000;
const MAX_RECALL = 50;

export interface MemwriteToolsOptions {
  client: MemwriteClient;
  /** The user whose memories the tools read and write. */
  userId: string;
  /** The session the remembered turns belong to (a fresh one when not given). */
  sessionId?: string;
}

type Reason = Record<string, unknown>;

function reasonText(reason: Reason): string {
  const values = Object.entries(reason)
    .filter(([key]) => key !== "type")
    .map(([key, value]) => `${key}=${String(value)}`)
    .join(", ");
  return `${String(reason.type ?? "unknown")}${values ? ` (${values})` : ""}`;
}

function deferredText(reason: Reason): string {
  if (reason.type === "DeferredNoLLM") {
    return "no model is configured to distil it; the rules could not read it whole";
  }
  if (reason.type === "DeferredModelFailed") return `the model failed (${String(reason.error ?? "error")})`;
  return reasonText(reason);
}

/** What a `remember` request's trace did, said so that the model can tell the user. */
export function rememberedSummary(ack: IngestAck, trace: Trace): string {
  const spans = trace.spans as { result: string; reason?: Reason | null }[];
  const deferred = spans.filter((s) => String(s.reason?.type ?? "").startsWith("Deferred"));
  const dropped = spans.filter(
    (s) => s.result === "reject" && s.reason && !deferred.includes(s) && s.reason.type !== "DuplicateTurn",
  );
  const { stored, merged } = trace.outcome;
  const parts: string[] = [];
  if (stored) parts.push(`stored ${stored} new memor${stored === 1 ? "y" : "ies"}`);
  if (merged) parts.push(`already known: merged into ${merged} existing memories (heard again)`);
  const duplicates = ack.duplicates?.length ?? 0;
  if (duplicates) parts.push(`already known: ${duplicates} turn(s) sent before word for word`);
  for (const span of deferred) {
    parts.push(
      `kept as an episode because ${deferredText(span.reason ?? {})}: the user's words are ` +
        "searchable with recall now and become memories once a model is available",
    );
  }
  parts.push(...dropped.map((s) => `not remembered: ${reasonText(s.reason ?? {})}`));
  if (trace.status === "in_progress") parts.push("still in progress: recall may find more shortly");
  return parts.join("; ") || "nothing was remembered";
}

/** One recall hit for the model: a memory with its id, or an episode marked as one. */
export function recalledLine(hit: SearchHit): string {
  if (hit.kind === "episode") return `- (episode: the user's own words, not distilled yet) ${hit.text}`;
  const memory = hit as Extract<SearchHit, { memoryId: string }>;
  return `- [${memory.memoryId}] ${memory.text} (${memory.type}, confidence ${(memory.confidence ?? 0).toFixed(2)})`;
}

/** The three tools, for `generateText({ tools: memwriteTools({ client, userId }) })`. */
export function memwriteTools({ client, userId, sessionId }: MemwriteToolsOptions) {
  const session = sessionId ?? `agent-${crypto.randomUUID().slice(0, 12)}`;
  return {
    remember: tool({
      description:
        "Remember what the user said about themselves (their preferences, facts, plans), " +
        "in their own words. Answers what happened: stored, already known, or kept as an episode.",
      inputSchema: z.object({
        statement: z.string().min(1).describe("The user's words to remember, e.g. 'I live in Berlin.'"),
      }),
      execute: async ({ statement }) => {
        const ack = await client.add({
          userId,
          sessionId: session,
          turns: [{ role: "user", content: statement }],
        });
        let trace: Trace;
        try {
          trace = await client.wait(ack.traceId, { timeoutMs: WAIT_MS });
        } catch (error) {
          if (!(error instanceof TraceNotFinished)) throw error;
          trace = error.trace as Trace;
        }
        return rememberedSummary(ack, trace);
      },
    }),
    recall: tool({
      description:
        "Recall what the user said before that answers a question, best first: memories with " +
        "their [id] (for forget) and episodes (the user's own words, not distilled yet).",
      inputSchema: z.object({
        query: z.string().min(1).describe("What to look for, e.g. 'where does the user live?'"),
        k: z.number().int().min(1).max(MAX_RECALL).optional().describe("How many results (5 when not given)."),
      }),
      execute: async ({ query, k }) => {
        const hits = await client.search({ userId, query, k: k ?? 5 });
        return hits.length ? hits.map(recalledLine).join("\n") : "nothing remembered about that";
      },
    }),
    forget: tool({
      description:
        "Forget one memory of the user by its id (recall gives the ids); an older memory it had " +
        "replaced is current again.",
      inputSchema: z.object({
        memoryId: z.string().min(1).describe("The id of the memory, as recall shows it in brackets."),
      }),
      execute: async ({ memoryId }) => {
        // The id is checked to be this user's first: another user's memory is not named.
        const memory = await client.getMemory(memoryId).catch((error: unknown) => {
          if (error instanceof NotFound) return undefined;
          throw error;
        });
        if (memory === undefined || memory.userId !== userId) {
          throw new Error(`no memory ${memoryId} (recall gives the ids of the memories)`);
        }
        const deleted = await client.deleteMemory(memoryId);
        const restored = deleted.restored.length;
        return `forgot ${memoryId}: ${memory.text}` + (restored ? `; ${restored} older memor${restored === 1 ? "y is" : "ies are"} current again` : "");
      },
    }),
  };
}
