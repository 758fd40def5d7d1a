// The AI SDK tools through the SDK's own loop: `generateText` with its mock model (offline, no
// key) calls remember, then recall, then forget, against a live `memwrite serve`.
import assert from "node:assert/strict";
import { test } from "node:test";

import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { MemwriteClient } from "memwrite";
import { memwriteTools } from "memwrite/ai";

import { apiKey, baseUrl, newUser, searchUntil } from "./env.mjs";

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};
const call = (toolName, input) => ({
  content: [{ type: "tool-call", toolCallId: `c-${toolName}`, toolName, input: JSON.stringify(input) }],
  finishReason: { unified: "tool-calls", raw: "tool_use" },
  usage,
  warnings: [],
});
const done = { content: [{ type: "text", text: "ok" }], finishReason: { unified: "stop", raw: "end_turn" }, usage, warnings: [] };

/** One turn of the agent: the mock model calls `toolName` with `input`, then stops. */
async function run(tools, toolName, input) {
  const model = new MockLanguageModelV3({ doGenerate: [call(toolName, input), done] });
  const result = await generateText({ model, tools, prompt: "go", stopWhen: stepCountIs(3) });
  const [output] = result.steps[0].content.filter((part) => part.type === "tool-result" || part.type === "tool-error");
  assert.ok(output, JSON.stringify(result.steps[0].content));
  // The model sees the tool's answer in its next prompt.
  assert.ok(JSON.stringify(model.doGenerateCalls[1].prompt).includes(toolName));
  return output;
}

test("a model remembers, recalls and forgets a user's memory through generateText", async () => {
  const client = new MemwriteClient({ baseUrl, apiKey });
  const dana = newUser();
  const tools = memwriteTools({ client, userId: dana });

  const remembered = await run(tools, "remember", { statement: "I prefer tea over coffee in the morning." });
  assert.equal(remembered.type, "tool-result");
  assert.match(remembered.output, /stored 1 new memory|kept as an episode/);

  await searchUntil(client, { userId: dana, query: "tea", k: 1 }, (found) => found.length > 0);
  const recalled = await run(tools, "recall", { query: "what does she drink in the morning?" });
  assert.match(recalled.output, /tea/);
  const id = /\[([^\]]+)\]/.exec(recalled.output)?.[1];
  assert.ok(id, recalled.output);

  const forgot = await run(tools, "forget", { memoryId: id });
  assert.match(forgot.output, new RegExp(`forgot ${id}`));
  const after = await client.search({ userId: dana, query: "tea", k: 5, kinds: ["memory"] });
  assert.ok(!after.some((hit) => hit.memoryId === id));
});

test("forget refuses another user's memory id, and the model is told why", async () => {
  const client = new MemwriteClient({ baseUrl, apiKey });
  const owner = newUser();
  const ack = await client.add({ userId: owner, sessionId: "s", turns: [{ role: "user", content: "I prefer tea over coffee." }] });
  await client.wait(ack.traceId);
  const query = { userId: owner, query: "tea", k: 1, kinds: ["memory"] };
  const [hit] = await searchUntil(client, query, (found) => found.length > 0);
  assert.ok(hit);
  const stranger = await run(memwriteTools({ client, userId: newUser() }), "forget", { memoryId: hit.memoryId });
  assert.equal(stranger.type, "tool-error");
  assert.match(String(stranger.error), /no memory/);
  assert.equal((await client.getMemory(hit.memoryId)).memoryId, hit.memoryId);
});
