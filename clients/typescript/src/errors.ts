// One error class per error code of the API, under one root (`MemwriteApiError`); the same
// classes and codes as the Python client (docs/client.md "Errors").

export interface FieldError {
  field: string;
  message: string;
}

/** Root of everything the client throws. */
export class MemwriteClientError extends Error {
  override name = "MemwriteClientError";
}

/** No answer after every retry (connection refused, reset, timed out). */
export class ServiceUnreachable extends MemwriteClientError {
  override name = "ServiceUnreachable";
}

/** `wait` ran out of time; `trace` is the last state seen. */
export class TraceNotFinished extends MemwriteClientError {
  override name = "TraceNotFinished";
  constructor(
    readonly traceId: string,
    readonly timeoutMs: number,
    readonly trace: { status: string },
  ) {
    super(`trace ${traceId} still ${trace.status} after ${timeoutMs / 1000}s`);
  }
}

/** An answer of the API that is not a success: `status`, `code` (the API's `error`), the
 * field `errors`, the whole `body` and, on 429 and 503, the `retryAfterMs` the server asked. */
export class MemwriteApiError extends MemwriteClientError {
  static readonly code: string = "";
  override name = "MemwriteApiError";
  readonly code: string;
  readonly errors: FieldError[];
  readonly apiMessage: string;

  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
    readonly retryAfterMs?: number,
  ) {
    const code = String(body.error ?? (new.target as typeof MemwriteApiError).code);
    const errors = Array.isArray(body.errors)
      ? body.errors.filter(
          (e): e is FieldError =>
            typeof e === "object" && e !== null && "field" in e && "message" in e,
        )
      : [];
    const apiMessage = typeof body.message === "string" ? body.message : "";
    const detail = errors.map((e) => `${e.field}: ${e.message}`).join("; ") || apiMessage;
    super(`${status} ${code}${detail ? `: ${detail}` : ""}`);
    this.name = new.target.name;
    this.code = code;
    this.errors = errors;
    this.apiMessage = apiMessage;
  }
}

/** 400: the request is invalid; `errors` names each field at fault. */
export class InvalidRequest extends MemwriteApiError {
  static override readonly code = "invalid_request";
}
/** 401: missing or unknown API key. */
export class Unauthenticated extends MemwriteApiError {
  static override readonly code = "unauthenticated";
}
/** 403: the credential is not allowed (API Gateway). */
export class Forbidden extends MemwriteApiError {
  static override readonly code = "forbidden";
}
/** 404: no such trace, memory or user for this tenant. */
export class NotFound extends MemwriteApiError {
  static override readonly code = "not_found";
}
/** 405: no such method on the route. */
export class MethodNotAllowed extends MemwriteApiError {
  static override readonly code = "method_not_allowed";
}
/** 409: the rollback would undo later work (`body.memory_ids`, `body.trace_ids`). */
export class RollbackRefused extends MemwriteApiError {
  static override readonly code = "rollback_refused";
}
/** 409: the trace was recorded before traces kept their inputs: nothing to replay. */
export class TraceWithoutInputs extends MemwriteApiError {
  static override readonly code = "trace_without_inputs";
}
/** 409: an imported line names an id that already holds something else (`body.line`). */
export class ImportConflict extends MemwriteApiError {
  static override readonly code = "import_conflict";
}
/** 409: the operation needs the model (a backfill) and none is configured. */
export class ModelRequired extends MemwriteApiError {
  static override readonly code = "model_required";
}
/** 413: over a limit (`body.limit`). */
export class PayloadTooLarge extends MemwriteApiError {
  static override readonly code = "payload_too_large";
}
/** 415: the body is not of a media type the route takes. */
export class UnsupportedMediaType extends MemwriteApiError {
  static override readonly code = "unsupported_media_type";
}
/** 422: the same Idempotency-Key was sent earlier with another body. */
export class IdempotencyKeyReused extends MemwriteApiError {
  static override readonly code = "idempotency_key_reused";
}
/** 429: too many requests (retried with backoff before this is thrown). */
export class Throttled extends MemwriteApiError {
  static override readonly code = "throttled";
}
/** 503: unavailable for now (retried, honouring Retry-After, before this is thrown). */
export class Unavailable extends MemwriteApiError {
  static override readonly code = "unavailable";
}

type ApiErrorClass = new (
  status: number,
  body: Record<string, unknown>,
  retryAfterMs?: number,
) => MemwriteApiError;

export const ERRORS_BY_CODE: Readonly<Record<string, ApiErrorClass>> = Object.fromEntries(
  [
    InvalidRequest,
    Unauthenticated,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    RollbackRefused,
    TraceWithoutInputs,
    ImportConflict,
    ModelRequired,
    PayloadTooLarge,
    UnsupportedMediaType,
    IdempotencyKeyReused,
    Throttled,
    Unavailable,
  ].map((cls) => [cls.code, cls]),
);

// API Gateway's own answers have no `error` code: the status decides.
const ERRORS_BY_STATUS: Readonly<Record<number, ApiErrorClass>> = {
  400: InvalidRequest,
  401: Unauthenticated,
  403: Forbidden,
  404: NotFound,
  405: MethodNotAllowed,
  413: PayloadTooLarge,
  415: UnsupportedMediaType,
  422: IdempotencyKeyReused,
  429: Throttled,
  503: Unavailable,
};

/** The error of an answer: by its `error` code, else by its status. */
export function errorFor(status: number, body: unknown, retryAfterMs?: number): MemwriteApiError {
  const record: Record<string, unknown> =
    typeof body === "object" && body !== null && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : { message: String(body) };
  const cls =
    ERRORS_BY_CODE[String(record.error)] ?? ERRORS_BY_STATUS[status] ?? MemwriteApiError;
  return new cls(status, record, retryAfterMs);
}
