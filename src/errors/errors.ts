/**
 * Every error the API answers with, each declared once: its code, its HTTP status and
 * its message (fastify's lib/errors.js: `createError(code, message, status)`). One
 * code, one meaning. Services throw these classes and nothing HTTP-shaped, so the
 * bench, tests and a CLI can reuse them; ErrorFilter only reads `status` and `code`.
 */
export abstract class AppError extends Error {
  abstract readonly code: string;
  abstract readonly status: number;
  /** Seconds the client should wait before trying again (the answer's Retry-After), when the refusal knows. */
  readonly retryAfterS?: number;

  constructor(message: string) {
    // An expected outcome, not a bug: nobody reads its stack, and capturing one for
    // every SOLD_OUT of a 100,000-buyer sale showed up in the profile.
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
  }

  override get name(): string {
    return this.constructor.name;
  }
}

/** Every class createError made, by code: the table docs/api.md and the filter are checked against. */
export const ERROR_CODES = new Map<string, { readonly status: number }>();

/** A class for one code: `new SoldOutError('phone')` says `product "phone" is sold out`, 409. */
function createError<Args extends unknown[]>(code: string, status: number, message: (...args: Args) => string) {
  if (ERROR_CODES.has(code)) throw new Error(`error code ${code} is declared twice`);
  ERROR_CODES.set(code, { status });
  return class extends AppError {
    readonly code = code;
    readonly status = status;
    constructor(...args: Args) {
      super(message(...args));
    }
  };
}

// ---------------------------------------------------------------- the request

/**
 * The body, a parameter or a header, once parsed, is not what the route accepts.
 * `errors` names each field and the rule it breaks: a request that cannot be parsed at
 * all has no fields to name, and is BAD_REQUEST.
 */
export class ValidationFailedError extends createError('VALIDATION_FAILED', 400, (detail: string) => detail) {
  constructor(
    detail: string,
    readonly errors: readonly { readonly field: string; readonly messages: readonly string[] }[],
  ) {
    super(detail);
  }
}
/**
 * A request that cannot be parsed (bytes that are not HTTP, a URL that is not validly
 * percent-encoded, a body its JSON parser refuses), and any other 4xx the framework
 * raises: the table is closed, so a client sees only the codes declared here.
 */
export const BadRequestError = createError('BAD_REQUEST', 400, (detail: string) => detail);
export class UnauthorizedError extends createError(
  'UNAUTHORIZED',
  401,
  () => 'a valid admin token is required: Authorization: Bearer <ADMIN_TOKEN>',
) {}

/** A payment not signed by the payment provider (src/door/payment-signature.ts), nor by the admin token. */
export class PaymentSignatureInvalidError extends createError(
  'PAYMENT_SIGNATURE_INVALID',
  401,
  (why: string) =>
    `a payment is confirmed by the payment provider's signed callback: ${why}; send Payment-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<orderId>.<body>" with PAYMENT_WEBHOOK_SECRET>, or Authorization: Bearer <ADMIN_TOKEN>`,
) {}

// ---------------------------------------------------------------- the door (src/door): before the body is read

/** Over RATE_LIMIT_PER_IP or RATE_LIMIT_PER_USER; `Retry-After` and the RateLimit headers say when to come back. */
export class RateLimitedError extends createError(
  'RATE_LIMITED',
  429,
  (scope: 'ip' | 'user', count: number, windowMs: number) =>
    `too many requests from this ${scope === 'ip' ? 'address' : 'buyer'}: at most ${count} per ${windowMs / 1000} s; nothing was changed, retry after Retry-After seconds`,
) {}

/** BUYER_AUTH is on and the request has no `Authorization: Bearer` token. */
export class BuyerTokenRequiredError extends createError(
  'BUYER_TOKEN_REQUIRED',
  401,
  () => "a buyer token is required: Authorization: Bearer <token from the sale's identity provider>",
) {}

/** The buyer token is malformed, wrongly signed, or for another issuer, audience or algorithm. */
export class BuyerTokenInvalidError extends createError(
  'BUYER_TOKEN_INVALID',
  401,
  (reason: string) => `the buyer token is not valid (${reason}); get a new one from the sale's identity provider`,
) {}

/** The buyer token was valid once; its `exp` has passed. */
export class BuyerTokenExpiredError extends createError(
  'BUYER_TOKEN_EXPIRED',
  401,
  () => 'the buyer token has expired; get a fresh one and retry',
) {}

/** BUYER_AUTH names a JWKS URL whose keys could not be fetched (and none are cached): not the buyer's fault. */
export class BuyerKeysUnavailableError extends createError(
  'BUYER_KEYS_UNAVAILABLE',
  503,
  () =>
    "the identity provider's signing keys (BUYER_AUTH's JWKS URL) could not be fetched; nothing was changed, retry later",
) {}

/** The body's userId is not the token's subject: a buyer buys only as themselves. */
export class UserMismatchError extends createError(
  'USER_MISMATCH',
  403,
  (userId: string) =>
    `userId "${userId}" is not the buyer this token was issued to; send your own userId (the token's sub)`,
) {}

/**
 * What Fastify and Nest refuse before our code runs (routing, body parsing, limits),
 * by HTTP status; their own message is kept.
 */
export const FRAMEWORK_ERRORS: Readonly<Record<number, new (detail: string) => AppError>> = {
  400: BadRequestError,
  404: createError('NOT_FOUND', 404, (detail: string) => detail),
  408: createError('REQUEST_TIMEOUT', 408, (detail: string) => detail),
  413: createError('PAYLOAD_TOO_LARGE', 413, (detail: string) => detail),
  414: createError('URI_TOO_LONG', 414, (detail: string) => detail),
  415: createError('UNSUPPORTED_MEDIA_TYPE', 415, (detail: string) => detail),
  431: createError('HEADERS_TOO_LARGE', 431, (detail: string) => detail),
};
/**
 * A PUT that would start a new sale over the orders of the current one: the order log
 * is the only record of them, so discarding it takes the admin saying so.
 */
export class SaleHasOrdersError extends createError(
  'SALE_HAS_ORDERS',
  409,
  (productId: string, orders: number) =>
    `product "${productId}" has ${orders} order${orders === 1 ? '' : 's'} in its current sale, which a new sale discards; send the PUT again with "discardOrders": true to do so`,
) {}

/** The same Idempotency-Key (keys are scoped to a product) with another user or quantity (the IETF draft's 422). */
export class SaleNotSettledError extends createError(
  'SALE_NOT_SETTLED',
  409,
  (productId: string, entries: number) =>
    `product "${productId}"'s sale has ${entries} order events not yet settled into PostgreSQL: a restart would lose them; retry once settlement has caught up (GET /health: settlement)`,
) {}

export class SaleHasReservationsError extends createError(
  'SALE_HAS_RESERVATIONS',
  409,
  (productId: string, reserved: number) =>
    `product "${productId}"'s sale has ${reserved} orders still waiting for their payment: a restart would leave them neither paid nor expired; retry after their deadline, or once they are cancelled`,
) {}

export class IdempotencyKeyMismatchError extends createError(
  'IDEMPOTENCY_KEY_MISMATCH',
  422,
  () => 'this Idempotency-Key was already used for this product with another user or quantity; use a new key',
) {}

/** Another request with the same Idempotency-Key is still being decided (the draft's 409). */
export class IdempotencyKeyInUseError extends createError('IDEMPOTENCY_KEY_IN_USE', 409, (waitMs: number) =>
  waitMs > 0
    ? `a request with this Idempotency-Key is still being decided (${Math.ceil(waitMs / 1000)} s at most); retry with the same key`
    : 'another request now decides this Idempotency-Key; retry with the same key to learn its outcome',
) {}

// ---------------------------------------------------------------- the sale's rules (final answers)

/** The answer's Retry-After for a wait of `ms`: whole seconds, rounded up, at least 1. */
export function retryAfterSeconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

/** Before the sale's start by Redis's clock: `startsAt` in the body, Retry-After the seconds to it. */
export class SaleNotStartedError extends createError(
  'SALE_NOT_STARTED',
  409,
  (productId: string, startsAtMs: number, nowMs: number) =>
    `the sale of "${productId}" starts at ${new Date(startsAtMs).toISOString()}, in ${retryAfterSeconds(startsAtMs - nowMs)} s`,
) {
  readonly startsAt: string;
  override readonly retryAfterS: number;

  constructor(
    productId: string,
    readonly startsAtMs: number,
    /** Redis's clock when the refusal was decided. */
    readonly nowMs: number,
  ) {
    super(productId, startsAtMs, nowMs);
    this.startsAt = new Date(startsAtMs).toISOString();
    this.retryAfterS = retryAfterSeconds(startsAtMs - nowMs);
  }
}

/** At or after the sale's end by Redis's clock. */
export class SaleEndedError extends createError(
  'SALE_ENDED',
  409,
  (productId: string, endsAtMs: number) => `the sale of "${productId}" ended at ${new Date(endsAtMs).toISOString()}`,
) {}

/** A product with a waiting room sells only to a buyer the queue admitted. */
export class AdmissionRequiredError extends createError(
  'ADMISSION_REQUIRED',
  403,
  (productId: string) =>
    `product "${productId}" sells through its waiting room: join it (POST /api/products/${productId}/queue), wait for your pass, and send it as the Admission-Pass header`,
) {}

/** A pass that is not one this product issued to this user, or no longer valid. */
export class AdmissionInvalidError extends createError(
  'ADMISSION_INVALID',
  403,
  (why: string) => `this Admission-Pass ${why}; read your ticket (GET /api/products/:id/queue/:ticket) for its state`,
) {}

/** Joining the queue of a product that has none. */
export class NoQueueError extends createError(
  'NO_QUEUE',
  409,
  (productId: string) => `product "${productId}" has no waiting room: buy directly (POST /api/orders)`,
) {}

export class UnknownTicketError extends createError(
  'UNKNOWN_TICKET',
  404,
  (productId: string) => `no such ticket in the waiting room of product "${productId}" (a new sale starts a new queue)`,
) {}

export class UnknownProductError extends createError(
  'UNKNOWN_PRODUCT',
  404,
  (productId: string) => `product "${productId}" has no sale; an admin starts one with PUT /api/products/${productId}`,
) {}

export class SoldOutError extends createError(
  'SOLD_OUT',
  409,
  (productId: string) => `product "${productId}" is sold out`,
) {}

export class InsufficientStockError extends createError(
  'INSUFFICIENT_STOCK',
  409,
  (productId: string, remaining: number, requested: number) =>
    `product "${productId}" has ${remaining} left, fewer than the ${requested} asked for`,
) {}

export class LimitReachedError extends createError(
  'LIMIT_REACHED',
  409,
  (userId: string, perUserLimit: number, bought: number, requested: number) =>
    `user "${userId}" may buy at most ${perUserLimit} of this product and has ${bought}; ${requested} more would exceed the limit`,
) {}

// ---------------------------------------------------------------- an order's outcome (pay, cancel, expiry)

export class UnknownOrderError extends createError(
  'UNKNOWN_ORDER',
  404,
  (orderId: string) => `order "${orderId}" is not known (not placed, or its sale was restarted since)`,
) {}

/** A payment or a cancel of an order that another payment already paid. */
export class OrderPaidError extends createError(
  'ORDER_PAID',
  409,
  (orderId: string, paidBy: string) =>
    `order "${orderId}" was already paid by payment "${paidBy}"; any other payment for it is to be refunded`,
) {}

export class OrderCancelledError extends createError(
  'ORDER_CANCELLED',
  409,
  (orderId: string) =>
    `order "${orderId}" was cancelled and its units went back to stock; a payment for it is to be refunded`,
) {}

/** The payment deadline passed first (by Redis's clock): the units went back to stock. */
export class OrderExpiredError extends createError(
  'ORDER_EXPIRED',
  409,
  (orderId: string) =>
    `order "${orderId}" expired: its payment deadline passed and its units went back to stock; a payment for it is to be refunded`,
) {}

// ---------------------------------------------------------------- not now: nothing was changed, retry

/** The lock was not obtained within LOCK_WAIT_MS. */
export class LockTimeoutError extends createError(
  'LOCK_TIMEOUT',
  503,
  (waitMs: number) => `the product lock was not obtained within ${waitMs} ms; nothing was changed, retry later`,
) {}

/**
 * The hold outlived its validity (TTL minus clock drift, or a watchdog renewal that
 * failed) before the write, so another buyer may hold the lock now; the write was not sent.
 */
export class LockExpiredError extends createError(
  'LOCK_EXPIRED',
  503,
  (validityMs: number) =>
    `the product lock expired (validity ${validityMs} ms) before the order was written; nothing was changed, retry later`,
) {}

/** A fenced write refused by Redis: a later lock was issued while this holder worked (it paused past its TTL). */
export class StaleLockError extends createError(
  'STALE_LOCK',
  503,
  (token: number, newest: number) =>
    `the product lock was taken by a later holder (fencing token ${newest} > ours, ${token}) before the order was written; nothing was changed, retry later`,
) {}

/**
 * A fenced write found the stock or a buyer's count changed under its hold by a writer
 * the fence did not see (an instance of the `lock` strategy beside a `fenced` one, a
 * lost fencing counter): Redis refused it, atomically with the check, nothing written.
 */
export class LockBypassedError extends createError(
  'LOCK_BYPASSED',
  503,
  () =>
    "another writer changed the product's stock or a buyer's units during this lock's hold (one the fencing token did not see); nothing was changed, retry",
) {}

/** An optimistic purchase kept losing its WATCH race until its attempts or its wait budget ran out. */
export class ContentionError extends createError('CONTENTION', 503, (attempts: number, waitMs: number) =>
  attempts === 0
    ? `this process's other buyers of the product used the whole wait budget (${waitMs} ms) before this one's first optimistic attempt; nothing was changed, retry later`
    : `the product kept changing under ${attempts} optimistic attempt${attempts === 1 ? '' : 's'} (budget ${waitMs} ms); nothing was changed, retry later`,
) {}

/**
 * A write was sent to Redis and its reply never came (timeout, connection cut): the
 * order may have been written, or not. Never answered as a failure, since it may not be one.
 */
export class OutcomeUnknownError extends createError(
  'OUTCOME_UNKNOWN',
  503,
  (detail?: string) =>
    detail ??
    'the order was sent to Redis but its answer was lost: it may or may not have been placed; ' +
      'retry with the same Idempotency-Key to learn which (a retry without one may buy a second time)',
) {}

/** Fewer than a majority of the Redlock nodes answer, so no lock can be granted. */
export class LockNodesUnavailableError extends createError(
  'LOCK_NODES_UNAVAILABLE',
  503,
  (down: number, nodes: number, quorum: number) =>
    `${down} of ${nodes} Redlock nodes are unreachable and a lock needs ${quorum}; nothing was changed, retry later`,
) {}

/**
 * GET /api/live/:productId past this instance's bounds on live streams (products
 * polled, streams open): each polled product costs Redis reads, each stream a socket.
 */
export class TooManyWatchersError extends createError(
  'TOO_MANY_WATCHERS',
  503,
  (detail: string) => `${detail}; retry later or watch from another instance`,
) {}

/**
 * The product's sale was started by an instance whose strategy does not exclude this
 * one's (a rolling deploy from `atomic` to `lock`, say): their purchases would not see
 * each other's holds, so this instance refuses to sell it rather than oversell.
 */
export class StrategyMismatchError extends createError(
  'STRATEGY_MISMATCH',
  503,
  (productId: string, soldBy: string, ours: string) =>
    `product "${productId}" is sold by instances of the "${soldBy}" strategies and this one runs "${ours}", which does not exclude them: it neither sells nor restarts that sale; retry (another instance serves it), or, once no "${soldBy}" instance serves it, restart its sale here with "switchStrategy": true`,
) {}

/**
 * Redis refused the command without running it, for a reason of its own that lasts
 * beyond one retry: out of memory, unable to persist, too few replicas, a read-only
 * replica, a user without permission. Each its own code; nothing was changed.
 */
export class RedisOutOfMemoryError extends createError(
  'REDIS_OUT_OF_MEMORY',
  503,
  () =>
    'Redis is out of memory (maxmemory reached with noeviction) and refuses writes; nothing was changed, retry later',
) {}
export class RedisPersistenceError extends createError(
  'REDIS_PERSISTENCE_FAILED',
  503,
  () => 'Redis cannot save to disk and refuses writes until it can (MISCONF); nothing was changed, retry later',
) {}
export class RedisNoReplicasError extends createError(
  'REDIS_NOT_ENOUGH_REPLICAS',
  503,
  () =>
    'Redis has fewer connected replicas than min-replicas-to-write and refuses writes (NOREPLICAS); nothing was changed, retry later',
) {}
export class RedisReadOnlyError extends createError(
  'REDIS_READ_ONLY',
  503,
  () => 'the Redis this instance writes to is a read-only replica (READONLY); nothing was changed, retry later',
) {}
export class RedisNoPermissionError extends createError('REDIS_NO_PERMISSION', 503, (inScript: boolean) =>
  inScript
    ? 'the Redis user lacks a permission a script needed partway through (NOPERM): Redis does not roll a script back, so writes before that command may have been applied; the ACL SETUSER line in docs/deployment.md grants what seckill needs'
    : 'the Redis user lacks a permission this command needs (NOPERM); nothing was changed; the ACL SETUSER line in docs/deployment.md grants what seckill needs',
) {}

/** The sale's Redis does not answer (down, restarting, paused past the command timeout). */
export class RedisUnavailableError extends createError(
  'REDIS_UNAVAILABLE',
  503,
  (detail?: string) => detail ?? 'Redis is not reachable; retry later',
) {}

// ---------------------------------------------------------------- a bug

/** Anything unexpected: logged in full, answered without internals. */
export class InternalError extends createError('INTERNAL_ERROR', 500, () => 'internal error') {}
