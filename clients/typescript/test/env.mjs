// The live `memwrite serve` the tests run against (tests/client/test_typescript.py starts it).
import assert from "node:assert/strict";

export const baseUrl = process.env.MEMWRITE_BASE_URL;
export const apiKey = process.env.MEMWRITE_API_KEY;
assert.ok(baseUrl && apiKey, "set MEMWRITE_BASE_URL and MEMWRITE_API_KEY (a running memwrite serve)");

export const newUser = () => `dana-${crypto.randomUUID().slice(0, 8)}`;
