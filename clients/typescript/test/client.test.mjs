// The client against a live `memwrite serve`: the agent loop of the contract, every operation
// group, one error class per refusal, and retries honouring Retry-After (a fake network).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  InvalidRequest,
  MemwriteApiError,
  MemwriteClient,
  NotFound,
  ServiceUnreachable,
  Throttled,
  Unauthenticated,
  signWebhook,
  verifyWebhookSignature,
} from "memwrite";

import { apiKey, baseUrl, newUser, searchUntil } from "./env.mjs";

const TURNS = [
  { role: "user", content: "I live in Berlin with my partner Alex and our dog Pixel." },
  { role: "user", content: "I work as a nurse at the Charité hospital." },
  { role: "user", content: "I prefer tea over coffee in the morning." },
];

test("an agent adds turns, waits for their trace and finds them by search", async () => {
  const mw = new MemwriteClient({ baseUrl, apiKey });
  const dana = newUser();
  const ack = await mw.add({ userId: dana, sessionId: "s-1", turns: TURNS });
  assert.equal(typeof ack.traceId, "string");
  assert.equal(ack.accepted, TURNS.length);
  const trace = await mw.wait(ack.traceId);
  assert.equal(trace.status, "complete");
  assert.ok(trace.outcome.stored >= 1);
  const hits = await searchUntil(
    mw,
    { userId: dana, query: "where does she live?", k: 5 },
    (found) => found.some((hit) => hit.text.includes("Berlin")),
  );
  assert.ok(Array.isArray(hits) && hits.length > 0);
  assert.ok(hits.some((hit) => hit.text.includes("Berlin")), JSON.stringify(hits));
  for (const hit of hits) assert.ok(["memory", "episode"].includes(hit.kind));
});

test("memories read back, are listed, explained by their traces and deleted one by one", async () => {
  const mw = new MemwriteClient({ baseUrl, apiKey });
  const dana = newUser();
  const ack = await mw.add({ userId: dana, sessionId: "s-1", turns: TURNS });
  await mw.wait(ack.traceId);
  const query = { userId: dana, query: "nurse tea coffee", k: 5, kinds: ["memory"] };
  const [hit] = await searchUntil(mw, query, (found) => found.length > 0);
  assert.ok(hit && hit.kind === "memory");
  const memory = await mw.getMemory(hit.memoryId);
  assert.equal(memory.memoryId, hit.memoryId);
  const why = await mw.memoryTraces(hit.memoryId);
  assert.ok(why.traces.some((t) => t.traceId === ack.traceId));
  const listed = [];
  for await (const m of mw.memories(dana, { pageSize: 1 })) listed.push(m.memoryId);
  assert.ok(listed.length >= 1 && listed.includes(hit.memoryId));
  const traces = [];
  for await (const t of mw.traces(dana)) traces.push(t.traceId);
  assert.deepEqual(traces, [ack.traceId]);
  const deleted = await mw.deleteMemory(hit.memoryId);
  assert.equal(deleted.memoryId, hit.memoryId);
  await assert.rejects(mw.getMemory(hit.memoryId), NotFound);
  // A second delete is a 404, not retried as if it were a no-op.
  await assert.rejects(mw.deleteMemory(hit.memoryId), NotFound);
});

test("episodes, export and import, settings and backfill", async () => {
  const mw = new MemwriteClient({ baseUrl, apiKey });
  const dana = newUser();
  await mw.wait((await mw.add({ userId: dana, sessionId: "s-1", turns: TURNS })).traceId);
  const episodes = [];
  for await (const e of mw.episodes(dana)) episodes.push(e);
  assert.ok(episodes.every((e) => e.userId === dana));
  const lines = await mw.exportUser(dana);
  assert.ok(lines.trim().split("\n").length > 1);
  const copy = newUser();
  await assert.rejects(mw.importUser(copy, lines), MemwriteApiError); // an export is one user's
  const report = await mw.importUser(dana, lines); // a repeat changes nothing
  assert.equal(report.userId, dana);
  const settings = await mw.settings();
  assert.deepEqual(await mw.putSettings(settings), settings);
  // Offline (no model key): the backfill is refused with its own class, or distils nothing.
  try {
    const result = await mw.backfill(dana);
    assert.equal(result.userId, dana);
  } catch (error) {
    assert.equal(error.code, "model_required", String(error));
  }
});

test("each refusal throws its own class, with the API's field errors", async () => {
  const mw = new MemwriteClient({ baseUrl, apiKey });
  const invalid = await mw.add({ userId: newUser(), sessionId: "s-1", turns: [] }).catch((e) => e);
  assert.ok(invalid instanceof InvalidRequest, String(invalid));
  assert.equal(invalid.status, 400);
  assert.equal(invalid.code, "invalid_request");
  assert.ok(invalid.errors.some((e) => e.field === "turns"), JSON.stringify(invalid.body));
  await assert.rejects(mw.trace("no-such-trace"), NotFound);
  const stranger = new MemwriteClient({ baseUrl, apiKey: "not-a-key" });
  await assert.rejects(stranger.search({ userId: "dana", query: "x", k: 1 }), Unauthenticated);
});

test("429 and 503 are retried after Retry-After, with one Idempotency-Key", async () => {
  const seen = [];
  const answers = [
    new Response(JSON.stringify({ error: "throttled" }), { status: 429, headers: { "Retry-After": "0" } }),
    new Response(JSON.stringify({ error: "unavailable" }), { status: 503 }),
    new Response(JSON.stringify({ trace_id: "t-1", accepted: 1, skipped: [], turn_ids: ["u"] }), {
      status: 202,
      headers: { "Content-Type": "application/json" },
    }),
  ];
  const fake = async (request) => {
    seen.push(request.headers.get("Idempotency-Key"));
    return answers.shift();
  };
  const mw = new MemwriteClient({ baseUrl, apiKey, fetch: fake, retry: { baseDelayMs: 1 } });
  const ack = await mw.add({ userId: "dana", sessionId: "s", turns: [{ role: "user", content: "hi" }] });
  assert.equal(ack.traceId, "t-1");
  assert.equal(seen.length, 3);
  assert.equal(new Set(seen).size, 1);
  assert.ok(seen[0]);
  // Out of attempts: the last refusal is thrown, its Retry-After kept.
  const always = async () => new Response("{}", { status: 429, headers: { "Retry-After": "0" } });
  const tired = new MemwriteClient({ baseUrl, apiKey, fetch: always, retry: { attempts: 2, baseDelayMs: 1 } });
  const error = await tired.trace("t").catch((e) => e);
  assert.ok(error instanceof Throttled && error.retryAfterMs === 0, String(error));
});

test("no answer at all is ServiceUnreachable after the retries", async () => {
  const mw = new MemwriteClient({ baseUrl: "http://127.0.0.1:9", apiKey, retry: { attempts: 2, baseDelayMs: 1 } });
  await assert.rejects(mw.trace("t"), ServiceUnreachable);
});

test("a webhook's X-Memwrite-Signature is verified against the raw body", () => {
  const body = '{"type":"memory.created","memory_id":"m-1"}';
  const signature = signWebhook("s3cret", body);
  // What memwrite.feed.webhooks.sign gives for this secret and body.
  assert.equal(signature, "sha256=05e6c8c474fa2d97b45615d8acbba641e99d447baf524cf7d08e69bb75710fac");
  assert.ok(verifyWebhookSignature("s3cret", body, signature));
  assert.ok(!verifyWebhookSignature("other", body, signature));
  assert.ok(!verifyWebhookSignature("s3cret", `${body} `, signature));
  assert.ok(!verifyWebhookSignature("s3cret", body, undefined));
});

test("a large export's 303 is followed to its URL without the API key", async () => {
  const seen = [];
  const fake = async (request) => {
    seen.push([request.url, request.headers.get("x-api-key")]);
    if (request.url.startsWith(baseUrl)) {
      const location = "https://bucket.example/export.jsonl?X-Amz-Signature=abc";
      return new Response(JSON.stringify({ expires_in: 3600 }), { status: 303, headers: { Location: location } });
    }
    return new Response('{"kind":"header"}\n', { status: 200 });
  };
  const mw = new MemwriteClient({ baseUrl, apiKey, fetch: fake });
  assert.equal(await mw.exportUser("dana"), '{"kind":"header"}\n');
  assert.deepEqual(seen, [
    [`${baseUrl}/v1/users/dana/export`, apiKey],
    ["https://bucket.example/export.jsonl?X-Amz-Signature=abc", null],
  ]);
});

test("a delete is not repeated once it may have reached the server", async () => {
  let sent = 0;
  const reset = async () => {
    sent += 1;
    throw new TypeError("fetch failed", { cause: Object.assign(new Error("socket hang up"), { code: "ECONNRESET" }) });
  };
  const mw = new MemwriteClient({ baseUrl, apiKey, fetch: reset, retry: { baseDelayMs: 1 } });
  await assert.rejects(mw.deleteMemory("m-1"), ServiceUnreachable);
  assert.equal(sent, 1);
  sent = 0;
  await assert.rejects(mw.getMemory("m-1"), ServiceUnreachable); // a read is retried
  assert.equal(sent, 4);
});

test("usage counts the tenant's turns over a range; a bad bound is an InvalidRequest", async () => {
  const mw = new MemwriteClient({ baseUrl, apiKey });
  const before = await mw.usage();
  const ack = await mw.add({ userId: newUser(), sessionId: "s-1", turns: TURNS });
  await mw.wait(ack.traceId);
  const after = await mw.usage();
  assert.ok(after.turnsIn >= before.turnsIn + TURNS.length, JSON.stringify(after));
  assert.ok(after.turnsKept >= before.turnsKept + ack.accepted);
  assert.ok(after.embeddings > before.embeddings);
  assert.equal(typeof after.costUsd, "number");
  const past = await mw.usage({ since: "2025-01-01", until: "2025-01-31" });
  assert.deepEqual([past.from, past.to, past.turnsIn], ["2025-01-01T00:00:00Z", "2025-02-01T00:00:00Z", 0]);
  await assert.rejects(mw.usage({ since: "2026-11-20", until: "2026-11-10" }), InvalidRequest);
});
