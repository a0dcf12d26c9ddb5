/** Not now (nothing was changed, retry) and a bug: the 5xx answers (see errors.ts). */
import { createError, example } from './app-error';

// ---------------------------------------------------------------- not now: nothing was changed, retry

/** The lock was not obtained within LOCK_WAIT_MS. */
export class LockTimeoutError extends createError(
  'LOCK_TIMEOUT',
  503,
  (waitMs: number) => `the product lock was not obtained within ${waitMs} ms; nothing was changed, retry later`,
) {}
example(LockTimeoutError, 2000);

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
example(LockExpiredError, 9990);

/** A fenced write refused by Redis: a later lock was issued while this holder worked (it paused past its TTL). */
export class StaleLockError extends createError(
  'STALE_LOCK',
  503,
  (token: number, newest: number) =>
    `the product lock was taken by a later holder (fencing token ${newest} > ours, ${token}) before the order was written; nothing was changed, retry later`,
) {}
example(StaleLockError, 41, 42);

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
example(LockBypassedError);

/** An optimistic purchase kept losing its WATCH race until its attempts or its wait budget ran out. */
export class ContentionError extends createError('CONTENTION', 503, (attempts: number, waitMs: number) =>
  attempts === 0
    ? `this process's other buyers of the product used the whole wait budget (${waitMs} ms) before this one's first optimistic attempt; nothing was changed, retry later`
    : `the product kept changing under ${attempts} optimistic attempt${attempts === 1 ? '' : 's'} (budget ${waitMs} ms); nothing was changed, retry later`,
) {}
example(ContentionError, 8, 2000);

/**
 * A bucketed product's last units kept moving to other buckets' buyers before this one's
 * could buy them (`taken`); or (`moving`: its waiting room) kept moving between its
 * buckets through every read that would have said none is left (src/orders/escrow.ts);
 * or (`changed`) the product was deleted and put again while the purchase went to the
 * bucket its list chose (its buckets half-way through that change, or each time); or
 * (`returning`) units kept coming back to several buckets and selling again between the
 * reads that would have said the product is short: no read can tell that from a product
 * short at each of them (Escrow.confirmed()).
 */
export class BucketsBusyError extends createError(
  'BUCKETS_BUSY',
  503,
  (attempts: number, why: 'taken' | 'moving' | 'changed' | 'returning' = 'taken') =>
    why === 'moving'
      ? `the product's last units kept moving between its buckets through ${attempts} reads of them all; nothing was changed, retry`
      : why === 'returning'
        ? `units kept coming back (cancels, expiries) to several of the product's buckets and selling again between each of ${attempts} pairs of reads of them all, so no read could show it sold out or not; nothing was changed, retry`
        : why === 'changed'
          ? `the product was deleted and put again while this purchase went to its bucket (${attempts} time${attempts === 1 ? '' : 's'}); nothing was changed, retry`
          : `the product's last units were taken by buyers of its other buckets each of the ${attempts} times they were moved to this buyer's; nothing was changed, retry`,
) {
  /** Whether it is `changed`: the purchase's bucket list was of another sale (checkout reads it again). */
  get listChanged(): boolean {
    return this.args[1] === 'changed';
  }
}
example(BucketsBusyError, 16);

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
example(OutcomeUnknownError);

/** Fewer than a majority of the Redlock nodes answer, so no lock can be granted. */
export class LockNodesUnavailableError extends createError(
  'LOCK_NODES_UNAVAILABLE',
  503,
  (down: number, nodes: number, quorum: number) =>
    `${down} of ${nodes} Redlock nodes are unreachable and a lock needs ${quorum}; nothing was changed, retry later`,
) {}
example(LockNodesUnavailableError, 2, 3, 2);

/**
 * GET /api/live/:productId past this instance's bounds on live streams (products
 * polled, streams open): each polled product costs Redis reads, each stream a socket.
 */
export class TooManyWatchersError extends createError(
  'TOO_MANY_WATCHERS',
  503,
  (detail: string) => `${detail}; retry later or watch from another instance`,
) {}
example(TooManyWatchersError, 'this instance already holds 256 live streams');

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
example(StrategyMismatchError, 'phone', 'lock-free', 'lock');

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
example(RedisOutOfMemoryError);
export class RedisPersistenceError extends createError(
  'REDIS_PERSISTENCE_FAILED',
  503,
  () => 'Redis cannot save to disk and refuses writes until it can (MISCONF); nothing was changed, retry later',
) {}
example(RedisPersistenceError);
export class RedisNoReplicasError extends createError(
  'REDIS_NOT_ENOUGH_REPLICAS',
  503,
  () =>
    'Redis has fewer connected replicas than min-replicas-to-write and refuses writes (NOREPLICAS); nothing was changed, retry later',
) {}
example(RedisNoReplicasError);
export class RedisReadOnlyError extends createError(
  'REDIS_READ_ONLY',
  503,
  () => 'the Redis this instance writes to is a read-only replica (READONLY); nothing was changed, retry later',
) {}
example(RedisReadOnlyError);
export class RedisNoPermissionError extends createError('REDIS_NO_PERMISSION', 503, (inScript: boolean) =>
  inScript
    ? 'the Redis user lacks a permission a script needed partway through (NOPERM): Redis does not roll a script back, so writes before that command may have been applied; the ACL SETUSER line in docs/deployment.md grants what seckill needs'
    : 'the Redis user lacks a permission this command needs (NOPERM); nothing was changed; the ACL SETUSER line in docs/deployment.md grants what seckill needs',
) {}
example(RedisNoPermissionError, false);

/** The sale's Redis does not answer (down, restarting, paused past the command timeout). */
export class RedisUnavailableError extends createError(
  'REDIS_UNAVAILABLE',
  503,
  (detail?: string) => detail ?? 'Redis is not reachable; retry later',
) {}
example(RedisUnavailableError);

/**
 * The system of record does not answer (down, paused past PG_STATEMENT_TIMEOUT_MS), or
 * this instance has not migrated it yet: an admin's read of it, retried later, answers.
 */
export class PostgresUnavailableError extends createError(
  'POSTGRES_UNAVAILABLE',
  503,
  (detail?: string) => detail ?? 'PostgreSQL is not reachable; retry later',
) {}
example(PostgresUnavailableError);

/** A read of PostgreSQL from an instance started without DATABASE_URL: it has no system of record to read. */
export class SettlementOffError extends createError(
  'SETTLEMENT_OFF',
  501,
  () => 'this instance does not settle orders into PostgreSQL (DATABASE_URL is not set): it has no orders to list',
) {}
example(SettlementOffError);

// ---------------------------------------------------------------- a bug

/** Anything unexpected: logged in full, answered without internals. */
export class InternalError extends createError('INTERNAL_ERROR', 500, () => 'internal error') {}
example(InternalError);
