/** The request and the door: what is refused before the sale's rules are read (see errors.ts). */
import { AppError, createError, example } from './app-error';

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
example(ValidationFailedError, 'quantity must not be greater than 100', [
  { field: 'quantity', messages: ['quantity must not be greater than 100'] },
]);
/**
 * A request that cannot be parsed (bytes that are not HTTP, a URL that is not validly
 * percent-encoded, a body its JSON parser refuses), and any other 4xx the framework
 * raises: the table is closed, so a client sees only the codes declared here.
 */
export const BadRequestError = createError('BAD_REQUEST', 400, (detail: string) => detail);
example(BadRequestError, 'the request is not valid HTTP');
export class UnauthorizedError extends createError(
  'UNAUTHORIZED',
  401,
  () => 'a valid admin token is required: Authorization: Bearer <ADMIN_TOKEN>',
) {}
example(UnauthorizedError);

/** A payment not signed by the payment provider (src/door/payment-signature.ts), nor by the admin token. */
export class PaymentSignatureInvalidError extends createError(
  'PAYMENT_SIGNATURE_INVALID',
  401,
  (why: string) =>
    `a payment is confirmed by the payment provider's signed callback: ${why}; send Payment-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<orderId>.<body>" with PAYMENT_WEBHOOK_SECRET>, or Authorization: Bearer <ADMIN_TOKEN>`,
) {}
example(PaymentSignatureInvalidError, "its timestamp is more than 300 s from this server's clock");

// ---------------------------------------------------------------- the door (src/door): before the body is read

/** Over RATE_LIMIT_PER_IP or RATE_LIMIT_PER_USER; `Retry-After` and the RateLimit headers say when to come back. */
export class RateLimitedError extends createError(
  'RATE_LIMITED',
  429,
  (scope: 'ip' | 'user', count: number, windowMs: number) =>
    `too many requests from this ${scope === 'ip' ? 'address' : 'buyer'}: at most ${count} per ${windowMs / 1000} s; nothing was changed, retry after Retry-After seconds`,
) {}
example(RateLimitedError, 'ip', 20, 1_000);

/** BUYER_AUTH is on and the request has no `Authorization: Bearer` token. */
export class BuyerTokenRequiredError extends createError(
  'BUYER_TOKEN_REQUIRED',
  401,
  () => "a buyer token is required: Authorization: Bearer <token from the sale's identity provider>",
) {}
example(BuyerTokenRequiredError);

/** The buyer token is malformed, wrongly signed, or for another issuer, audience or algorithm. */
export class BuyerTokenInvalidError extends createError(
  'BUYER_TOKEN_INVALID',
  401,
  (reason: string) => `the buyer token is not valid (${reason}); get a new one from the sale's identity provider`,
) {}
example(BuyerTokenInvalidError, '"aud" claim check failed');

/** The buyer token was valid once; its `exp` has passed. */
export class BuyerTokenExpiredError extends createError(
  'BUYER_TOKEN_EXPIRED',
  401,
  () => 'the buyer token has expired; get a fresh one and retry',
) {}
example(BuyerTokenExpiredError);

/** BUYER_AUTH names a JWKS URL whose keys could not be fetched (and none are cached): not the buyer's fault. */
export class BuyerKeysUnavailableError extends createError(
  'BUYER_KEYS_UNAVAILABLE',
  503,
  () =>
    "the identity provider's signing keys (BUYER_AUTH's JWKS URL) could not be fetched; nothing was changed, retry later",
) {}
example(BuyerKeysUnavailableError);

/** The body's userId is not the token's subject: a buyer buys only as themselves. */
export class UserMismatchError extends createError(
  'USER_MISMATCH',
  403,
  (userId: string) =>
    `userId "${userId}" is not the buyer this token was issued to; send your own userId (the token's sub)`,
) {}
example(UserMismatchError, 'alice');

/**
 * What Fastify and Nest refuse before our code runs (routing, body parsing, limits),
 * by HTTP status; their own message is kept.
 */
export const FRAMEWORK_ERRORS: Readonly<
  Record<number, (new (detail: string) => AppError) & { readonly code: string }>
> = {
  400: BadRequestError,
  404: createError('NOT_FOUND', 404, (detail: string) => detail),
  408: createError('REQUEST_TIMEOUT', 408, (detail: string) => detail),
  413: createError('PAYLOAD_TOO_LARGE', 413, (detail: string) => detail),
  414: createError('URI_TOO_LONG', 414, (detail: string) => detail),
  415: createError('UNSUPPORTED_MEDIA_TYPE', 415, (detail: string) => detail),
  431: createError('HEADERS_TOO_LARGE', 431, (detail: string) => detail),
};
example(FRAMEWORK_ERRORS[404], 'Cannot GET /docs/nothing.js');
example(FRAMEWORK_ERRORS[408], 'the request did not arrive in time');
example(FRAMEWORK_ERRORS[413], 'Request body is too large');
example(FRAMEWORK_ERRORS[414], "'/api/products/xxxx...' is exceeding the max param length");
example(FRAMEWORK_ERRORS[415], 'Unsupported Media Type');
example(FRAMEWORK_ERRORS[431], 'the request headers are too large');
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
example(SaleHasOrdersError, 'phone', 5);

/** A PUT that names another bucket count than the product's: its buckets are fixed for its life (src/sale/buckets.ts). */
export class BucketsFixedError extends createError(
  'BUCKETS_FIXED',
  409,
  (productId: string, buckets: number, asked: number) =>
    `product "${productId}" is sold from ${buckets} bucket${buckets === 1 ? '' : 's'}, fixed for its life; to sell it from ${asked}, DELETE it and PUT it again`,
) {}
example(BucketsFixedError, 'phone', 3, 1);

export class SaleNotSettledError extends createError(
  'SALE_NOT_SETTLED',
  409,
  (productId: string, entries: number) =>
    `product "${productId}"'s sale has ${entries} order events not yet settled into PostgreSQL: a restart would lose them; retry once settlement has caught up (GET /health: settlement)`,
) {}
example(SaleNotSettledError, 'phone', 12);

export class SaleHasReservationsError extends createError(
  'SALE_HAS_RESERVATIONS',
  409,
  (productId: string, reserved: number) =>
    `product "${productId}"'s sale has ${reserved} orders still waiting for their payment: a restart would leave them neither paid nor expired; retry after their deadline, or once they are cancelled`,
) {}
example(SaleHasReservationsError, 'phone', 3);

/**
 * A DELETE of a product some of whose orders PostgreSQL does not hold: not settled yet
 * (retry once settlement caught up), or never to be, where the prefix does not settle
 * (then deleting them takes the admin saying so).
 */
export class OrdersUnsettledError extends createError(
  'ORDERS_UNSETTLED',
  409,
  (productId: string, count: number, onlyInRedis: boolean) =>
    onlyInRedis
      ? `product "${productId}" has ${count} ${count === 1 ? 'order that exists' : 'orders that exist'} only in Redis (orders are not settled into PostgreSQL here): deleting the product deletes them; send the DELETE again with ?discardOrders=true to do so`
      : `product "${productId}" has ${count} order event${count === 1 ? '' : 's'} not yet settled into PostgreSQL: deleting the product would lose them; retry once settlement has caught up (GET /health: settlement)`,
) {}
example(OrdersUnsettledError, 'phone', 12, false);

export class ReservationsOpenError extends createError(
  'RESERVATIONS_OPEN',
  409,
  (productId: string, reserved: number) =>
    `product "${productId}" has ${reserved} order${reserved === 1 ? '' : 's'} still waiting for ${reserved === 1 ? 'its' : 'their'} payment: deleting the product would leave ${reserved === 1 ? 'it' : 'them'} reserved forever; retry once paid, cancelled or expired (POST /api/products/${productId}/close cancels them)`,
) {}
example(ReservationsOpenError, 'phone', 3);

/** The same Idempotency-Key (keys are scoped to a product) with another user or quantity (the IETF draft's 422). */
export class IdempotencyKeyMismatchError extends createError(
  'IDEMPOTENCY_KEY_MISMATCH',
  422,
  () => 'this Idempotency-Key was already used for this product with another user or quantity; use a new key',
) {}
example(IdempotencyKeyMismatchError);

/** Another request with the same Idempotency-Key is still being decided (the draft's 409). */
export class IdempotencyKeyInUseError extends createError('IDEMPOTENCY_KEY_IN_USE', 409, (waitMs: number) =>
  waitMs > 0
    ? `a request with this Idempotency-Key is still being decided (${Math.ceil(waitMs / 1000)} s at most); retry with the same key`
    : 'another request now decides this Idempotency-Key; retry with the same key to learn its outcome',
) {}
example(IdempotencyKeyInUseError, 2000);
