import { LockExpiredError } from '../errors/errors';
import { resendingUntil } from '../redis/unrun-retry';
import { LocalQueue } from './local-queue';
import type { Hold } from './lock';

/** A held lock, as far as waiting and expiry need to know it. */
export interface Lease {
  /** performance.now() after which the lock may have expired in Redis. */
  readonly validUntil: number;
}

export interface HoldSteps<L extends Lease> {
  readonly line: LocalQueue;
  readonly key: string;
  readonly ttlMs: number;
  /** performance.now() by which the lock must be held, for both waits (LockTimeoutError after). */
  readonly deadline: number;
  /** Aborting it stops the wait (the product sold out meanwhile). */
  readonly signal?: AbortSignal;
  /**
   * Takes the lock in Redis by `deadline` (a performance.now() value), or throws;
   * calls `waiting` once its first try finds the lock taken.
   */
  acquire(deadline: number, waiting: () => void): Promise<L>;
  /** UsingOptions.onWait: called once, at most, when the lock is not free at once. */
  readonly onWait?: () => void;
  /** Gives the lock back; never throws (what it cannot release, the TTL frees). */
  release(lease: L): Promise<void>;
}

/**
 * The shape `lock` and `redlock` share:
 * - wait in this process's line for the product (LocalQueue), then for the Redis
 *   lock, by one deadline;
 * - run the section with a signal that aborts once the lease's validity is over, and
 *   an assertValid() that checks the clock (performance.now() against validUntil);
 * - release, then let the next one in line go.
 */
export async function holdInLine<L extends Lease, T>(
  steps: HoldSteps<L>,
  section: (validity: Pick<Hold, 'signal' | 'assertValid'>, lease: L) => Promise<T>,
): Promise<T> {
  const { line, key, deadline } = steps;
  let waited = false;
  const waiting = () => {
    if (waited) return;
    waited = true;
    steps.onWait?.();
  };
  // Behind another caller of this process: the lock is not free at once.
  if (line.busy(key)) waiting();
  await line.enter(key, deadline - performance.now(), steps.signal);
  try {
    const lease = await steps.acquire(deadline, waiting);
    const expiry = new AbortController();
    const expire = () => expiry.abort(new LockExpiredError(steps.ttlMs));
    const timer = setTimeout(expire, lease.validUntil - performance.now());
    timer.unref();
    const assertValid = () => {
      if (performance.now() >= lease.validUntil) expire();
      expiry.signal.throwIfAborted();
    };
    try {
      // On a cluster, a write a node redirected is sent again only while the lease is valid.
      return await resendingUntil(lease.validUntil, () => section({ signal: expiry.signal, assertValid }, lease));
    } finally {
      clearTimeout(timer);
      await steps.release(lease);
    }
  } finally {
    line.leave(key);
  }
}
