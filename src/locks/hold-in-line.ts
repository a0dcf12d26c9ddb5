import { LockExpiredError } from '../errors/domain-errors';
import { LocalQueue } from './local-queue';

/** A held lock, as far as waiting, expiry and hand-off need to know it. */
export interface Lease {
  /** Date.now() just before the request that took the lock. */
  readonly acquiredAt: number;
  /** Date.now() after which the lock may have expired in Redis. */
  readonly validUntil: number;
}

/** How long after acquiring a holder may still hand the lock to a local waiter. */
const HANDOFF_WINDOW_MS = 250;

export interface HoldSteps<L extends Lease> {
  readonly line: LocalQueue<L>;
  readonly key: string;
  readonly ttlMs: number;
  /** Date.now() by which the lock must be held, for both waits (LockTimeoutError after). */
  readonly deadline: number;
  /** Aborting it stops the wait (the product sold out meanwhile). */
  readonly signal?: AbortSignal;
  /** Takes the lock in Redis by `deadline` (a Date.now() value), or throws. */
  acquire(deadline: number): Promise<L>;
  /** Gives the lock back; never throws (what it cannot release, the TTL frees). */
  release(lease: L): Promise<void>;
}

/**
 * The shape `lock` and `redlock` share:
 * - wait in this process's line for the product (LocalQueue), then for the Redis
 *   lock, by one deadline;
 * - run the section with a signal that aborts once the lease's validity is over;
 * - hand-off: while the lease is young, pass it straight to the next buyer waiting
 *   in this process, saving a release and an acquire per sale. The lock never
 *   changes owner and never leaves Redis in between, so exclusion is unchanged; the
 *   window keeps every hand-off far inside the TTL and bounds how long other
 *   processes wait for their turn. Otherwise release, then let the next one in.
 */
export async function holdInLine<L extends Lease, T>(
  steps: HoldSteps<L>,
  section: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const { line, key } = steps;
  const { deadline } = steps;
  const handed = await line.enter(key, deadline - Date.now(), steps.signal);
  let lease: L;
  try {
    lease = handed ?? (await steps.acquire(deadline));
  } catch (err) {
    line.leave(key);
    throw err;
  }
  const expiry = new AbortController();
  const timer = setTimeout(() => expiry.abort(new LockExpiredError(steps.ttlMs)), lease.validUntil - Date.now());
  timer.unref();
  try {
    return await section(expiry.signal);
  } finally {
    clearTimeout(timer);
    const young = Date.now() < lease.acquiredAt + Math.min(steps.ttlMs / 4, HANDOFF_WINDOW_MS);
    if (!(young && line.leave(key, lease))) {
      await steps.release(lease);
      line.leave(key);
    }
  }
}
