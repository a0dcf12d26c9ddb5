/**
 * The bounds of a sale, shared by the admin side (products/) and the buyers' side
 * (orders/): what an id may look like and how large a sale, a limit and an order may be.
 */

/** Product and user ids: short, URL- and key-safe (no braces, so the `{p:<id>}` hash tag stays ours). */
export const ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
export const ID_RULE = 'must be 1-64 characters of A-Z a-z 0-9 _ -';

export const MAX_STOCK = 10_000_000;
/** Units one user may buy in one sale, at most. */
export const MAX_PER_USER_LIMIT = 100;
/** Units in one order: never more than any product's limit allows. */
export const MAX_QUANTITY = MAX_PER_USER_LIMIT;

/** How long a reservation waits for its payment unless the sale or PAYMENT_TIMEOUT_MS says otherwise: 15 minutes. */
export const DEFAULT_PAYMENT_TIMEOUT_MS = 15 * 60 * 1000;
/** Bounds of a sale's payment deadline: a second to a week. */
export const MIN_PAYMENT_TIMEOUT_MS = 1000;
export const MAX_PAYMENT_TIMEOUT_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * A sale window's instants: ISO 8601 date and time with seconds optional and an explicit
 * offset or `Z` (a time without one means a different instant on every server).
 */
export const INSTANT_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;
export const INSTANT_RULE = 'must be an ISO 8601 date and time with an offset or Z, e.g. 2026-11-27T10:00:00Z';

/** A waiting room's admission rate, buyers per second. */
export const MAX_ADMIT_PER_SECOND = 100_000;
/** How long an admitted buyer's pass stays valid unless the sale says otherwise: a minute. */
export const DEFAULT_PASS_TTL_MS = 60_000;
export const MIN_PASS_TTL_MS = 1_000;
export const MAX_PASS_TTL_MS = 60 * 60 * 1000;
