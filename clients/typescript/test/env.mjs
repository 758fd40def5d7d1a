// The live `memwrite serve` the tests run against (tests/client/test_typescript.py starts it).
import assert from "node:assert/strict";

export const baseUrl = process.env.MEMWRITE_BASE_URL;
export const apiKey = process.env.MEMWRITE_API_KEY;
assert.ok(baseUrl && apiKey, "set MEMWRITE_BASE_URL and MEMWRITE_API_KEY (a running memwrite serve)");

export const newUser = () => `dana-${crypto.randomUUID().slice(0, 8)}`;

/** `search` until `found(hits)`: the index follows a complete trace within moments (stage 7
 * reads the stream after the stages), as on AWS. The last hits after `timeoutMs`. */
export async function searchUntil(mw, input, found, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const hits = await mw.search(input);
    if (found(hits) || Date.now() >= deadline) return hits;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
