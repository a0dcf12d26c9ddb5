/**
 * Domain errors: plain classes with a stable machine-readable code. Services throw
 * these and nothing HTTP-shaped, so the bench, tests and a CLI can reuse them;
 * ErrorFilter alone decides the HTTP status.
 */
export abstract class DomainError extends Error {
  abstract readonly code: string;

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

export class UnknownProductError extends DomainError {
  readonly code = 'UNKNOWN_PRODUCT';
  constructor(productId: string) {
    super(`product "${productId}" has no sale; an admin starts one with PUT /api/products/${productId}`);
  }
}

export class SoldOutError extends DomainError {
  readonly code = 'SOLD_OUT';
  constructor(productId: string) {
    super(`product "${productId}" is sold out`);
  }
}

export class InsufficientStockError extends DomainError {
  readonly code = 'INSUFFICIENT_STOCK';
  constructor(
    productId: string,
    readonly remaining: number,
    requested: number,
  ) {
    super(`product "${productId}" has ${remaining} left, fewer than the ${requested} asked for`);
  }
}

export class LimitReachedError extends DomainError {
  readonly code = 'LIMIT_REACHED';
  constructor(userId: string, perUserLimit: number, bought: number, requested: number) {
    super(
      `user "${userId}" may buy at most ${perUserLimit} of this product ` +
        `and has ${bought}; ${requested} more would exceed the limit`,
    );
  }
}

export class UnauthorizedError extends DomainError {
  readonly code = 'UNAUTHORIZED';
  constructor() {
    super('a valid admin token is required: Authorization: Bearer <ADMIN_TOKEN>');
  }
}

/** The lock was not obtained within LOCK_WAIT_MS; nothing was changed. */
export class LockTimeoutError extends DomainError {
  readonly code = 'LOCK_TIMEOUT';
  constructor(waitMs: number) {
    super(`the product lock was not obtained within ${waitMs} ms; nothing was changed, retry later`);
  }
}

/**
 * The critical section outlived the lock's validity (TTL minus clock drift), so
 * another buyer may now hold the lock; the write was not attempted.
 */
export class LockExpiredError extends DomainError {
  readonly code = 'LOCK_TIMEOUT';
  constructor(validityMs: number) {
    super(`the product lock expired after ${validityMs} ms before the order was written; nothing was changed, retry later`);
  }
}

/**
 * An optimistic purchase kept losing its WATCH race until its attempts or its wait
 * budget ran out; every attempt was discarded, so nothing was changed.
 */
export class ContentionError extends DomainError {
  readonly code = 'LOCK_TIMEOUT';
  constructor(attempts: number, waitMs: number) {
    super(`the product kept changing under ${attempts} optimistic attempts (budget ${waitMs} ms); nothing was changed, retry later`);
  }
}

/** Redlock cannot reach a majority of its lock nodes, so no lock can be granted; nothing was changed. */
/**
 * A fenced hold's write refused by Redis: a later lock was issued while this holder
 * was still working (it paused past its TTL). Nothing was written.
 */
export class StaleLockError extends DomainError {
  readonly code = 'STALE_LOCK';
  constructor(token: number, newest: number) {
    super(`the product lock was taken by a later holder (fencing token ${newest} > ours, ${token}) before the order was written; nothing was changed, retry later`);
  }
}

export class LockQuorumError extends DomainError {
  readonly code = 'REDIS_UNAVAILABLE';
  constructor(down: number, nodes: number, quorum: number) {
    super(`${down} of ${nodes} Redlock nodes are unreachable and a lock needs ${quorum}; nothing was changed, retry later`);
  }
}
