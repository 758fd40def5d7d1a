// Verifying a webhook delivery: the API signs each POST's raw JSON body with the webhook's
// secret, `X-Memwrite-Signature: sha256=<hex HMAC-SHA256 of the body>` (docs/change-feed.md).

import { createHmac, timingSafeEqual } from "node:crypto";

export const SIGNATURE_HEADER = "X-Memwrite-Signature";

/** `sha256=<hex>`: the signature memwrite sends for `body` under `secret`. */
export function signWebhook(secret: string, body: string | Uint8Array): string {
  return `sha256=${createHmac("sha256", secret).update(body).digest("hex")}`;
}

/** Whether `signature` (the header's value) is memwrite's for this raw `body` under `secret`.
 * Pass the body exactly as received, before any JSON parsing; compared in constant time. */
export function verifyWebhookSignature(
  secret: string,
  body: string | Uint8Array,
  signature: string | null | undefined,
): boolean {
  if (!signature) return false;
  const expected = Buffer.from(signWebhook(secret, body));
  const given = Buffer.from(signature.trim());
  return given.length === expected.length && timingSafeEqual(given, expected);
}
