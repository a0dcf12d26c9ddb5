import type { Redis } from 'ioredis';
import { StaleLockError } from '../../errors/domain-errors';
import { fenceKeyFor } from '../../redis/key-layout';
import { WithLockOptions } from '../lock-strategy';
import { LockOptions, SetNxLockStrategy } from './lock.strategy';

/**
 * `fenced` — the `lock` strategy plus fencing tokens (Kleppmann, "How to do
 * distributed locking"; Redisson's RFencedLock, which leaves the check to the caller).
 *
 * - Acquire: fenced-acquire.lua does the same SET NX PX and, in the same step,
 *   INCRs the product's `:fence` counter: every acquisition by anyone gets a larger
 *   token than the one before.
 * - Write: the orders service sends the token with its write, and fenced-write.lua
 *   applies the batch only if no later token was issued; otherwise it changes
 *   nothing and the buyers get 503 STALE_LOCK (counted in lostLocks, logged). Each
 *   order in the stream carries the token it was written under.
 * - Everything else (owner token, compare-and-delete release, local line, validity
 *   signal, coalescing) is `lock`'s.
 *
 * What it closes: a holder that pauses longer than the TTL *between* its validity
 * check and its write (GC, SIGSTOP) can no longer write after another holder took
 * the lock: the refusal happens inside Redis, atomically with the write.
 */
export class FencedLockStrategy extends SetNxLockStrategy {
  override readonly name: string = 'fenced';

  constructor(
    private readonly fencing: Pick<Redis, 'set' | 'releaseLock' | 'fencedAcquire' | 'duplicate'>,
    options: LockOptions,
  ) {
    super(fencing, options);
  }

  protected override take(key: string, token: string): Promise<number | null> {
    return this.fencing.fencedAcquire(key, fenceKeyFor(key), token, this.options.ttlMs);
  }

  override withLock<T>(
    key: string,
    criticalSection: (signal: AbortSignal, fence?: number) => Promise<T>,
    options?: WithLockOptions,
  ): Promise<T> {
    return super.withLock(
      key,
      (signal, fence) =>
        criticalSection(signal, fence).catch((err: unknown) => {
          if (err instanceof StaleLockError) {
            this.lost++;
            this.logger.warn(`write under ${key} refused: ${err.message}`);
          }
          throw err;
        }),
      options,
    );
  }
}
