import type { RedisClient } from '../../redis/create-client';
import { StaleLockError } from '../../errors/errors';
import { productKeysOf } from '../../redis/key-layout';
import { fencedAcquire, fencedAcquireKeys } from '../../redis/lua-scripts';
import { Hold, ReadAtAcquire, UsingOptions } from '../lock';
import { LockLease, LockOptions, SetNxLockStrategy, Taken } from './lock.strategy';

/**
 * `fenced` — the `lock` strategy plus fencing tokens (Kleppmann, "How to do
 * distributed locking"; Redisson's RFencedLock, which leaves the check to the caller).
 *
 * - Acquire: fenced-acquire-6.lua does the same SET NX PX and, in the same step,
 *   INCRs the product's `:fence` counter: every acquisition by anyone gets a larger
 *   token than the one before, and never one below the last token a write applied
 *   (meta's `fence`), even if the counter was lost. Asked (UsingOptions.readAtAcquire),
 *   it also takes the section's first read in that step (Hold.read): a read under the
 *   lock one round trip sooner.
 * - Write: the section gets the token (`hold.fence`) and presents it with its write;
 *   fenced-write-8.lua applies it only if no later token was issued (and, in case the
 *   fence missed a holder, only within stock and each buyer's limit), and otherwise
 *   changes nothing and the section throws StaleLockError (503 STALE_LOCK). That hold
 *   is lost, and counted once: a later token means another holder took the key, so
 *   our release finds it gone and counts it (its one warning says the write was
 *   refused). Each order in the stream carries its token.
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

  protected override async take(key: string, token: string, read?: ReadAtAcquire): Promise<Taken> {
    const k = productKeysOf(key);
    // The lock taken is the key released and renewed: only a product's own lock key has a fence.
    if (k.lock !== key) throw new Error(`not a product's lock key: ${key}`);
    // No read asked: ARGV[3] is '' and the script returns the token alone.
    const reply = await fencedAcquire.run(
      this.fencing,
      fencedAcquireKeys(k),
      token,
      this.options.ttlMs,
      ...(read ?? ['']),
    );
    if (reply === null) return null;
    const [fence, ...taken] = reply;
    return read ? { fence, read: taken } : { fence };
  }

  /** Holds whose write the fence refused, by `key#fence`, until their release reports them. */
  private readonly refused = new Map<string, string>();

  override async using<T>(key: string, section: (hold: Hold) => Promise<T>, options?: UsingOptions): Promise<T> {
    let refusal: string | undefined;
    try {
      return await super.using(
        key,
        (hold) =>
          section(hold).catch((err: unknown) => {
            if (err instanceof StaleLockError) {
              refusal = `${key}#${hold.fence}`;
              this.refused.set(refusal, err.message);
            }
            throw err;
          }),
        options,
      );
    } finally {
      // Still here: the release did not find the lock lost (it failed: Redis went away),
      // so the refused write is counted and said here, still once.
      if (refusal !== undefined && this.refused.has(refusal)) {
        this.lost++;
        this.logger.warn(`write under ${key} refused: ${this.refused.get(refusal)}`);
        this.refused.delete(refusal);
      }
    }
  }

  protected override whyLost(lease: LockLease): string {
    const id = `${lease.key}#${lease.fence}`;
    const refused = this.refused.get(id);
    if (refused === undefined) return super.whyLost(lease);
    this.refused.delete(id);
    return `its write was refused: ${refused}`;
  }
}
