import type { RedisClient } from '../../redis/create-client';
import { StaleLockError } from '../../errors/errors';
import { fenceKeyFor } from '../../redis/key-layout';
import { fencedAcquire } from '../../redis/lua-scripts';
import { Hold, UsingOptions } from '../lock';
import { LockOptions, SetNxLockStrategy } from './lock.strategy';

/**
 * `fenced` — the `lock` strategy plus fencing tokens (Kleppmann, "How to do
 * distributed locking"; Redisson's RFencedLock, which leaves the check to the caller).
 *
 * - Acquire: fenced-acquire-2.lua does the same SET NX PX and, in the same step,
 *   INCRs the product's `:fence` counter: every acquisition by anyone gets a larger
 *   token than the one before.
 * - Write: the section gets the token (`hold.fence`) and presents it with its write;
 *   fenced-write-6.lua applies it only if no later token was issued, and otherwise
 *   changes nothing and the section throws StaleLockError (503 STALE_LOCK), which is
 *   counted here in lostLocks and logged. Each order in the stream carries its token.
 * - Everything else (owner token, compare-and-delete release, local line, validity
 *   signal) is `lock`'s.
 *
 * What it closes: a holder that pauses longer than the TTL *between* its validity
 * check and its write (GC, SIGSTOP) can no longer write after another holder took
 * the lock: the refusal happens inside Redis, atomically with the write.
 */
export class FencedLockStrategy extends SetNxLockStrategy {
  constructor(
    private readonly fencing: RedisClient,
    options: LockOptions,
  ) {
    super(fencing, options);
  }

  protected override take(key: string, token: string): Promise<number | null> {
    return fencedAcquire.run(this.fencing, [key, fenceKeyFor(key)], token, this.options.ttlMs);
  }

  override using<T>(key: string, section: (hold: Hold) => Promise<T>, options?: UsingOptions): Promise<T> {
    return super.using(
      key,
      (hold) =>
        section(hold).catch((err: unknown) => {
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
