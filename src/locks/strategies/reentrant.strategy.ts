import { Logger } from '@nestjs/common';
import type { RedisClient } from '../../redis/create-client';
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { LockExpiredError, LockTimeoutError } from '../../errors/errors';
import { reentrantAcquire, reentrantReenter, reentrantRelease, reentrantRenew } from '../../redis/lua-scripts';
import { BestEffortUndo } from '../best-effort-undo';
import { driftMs } from '../drift';
import { LocalQueue } from '../local-queue';
import { Hold, Lock, UsingOptions } from '../lock';
import { Attempt, releasedChannel, ReleaseSubscriber } from '../release-subscriber';

export interface ReentrantOptions {
  readonly ttlMs: number;
  readonly waitMs: number;
}

/** A waiter re-checks at least this often even if no release message comes. */
const MAX_WAIT_MS = 1_000;

/** What one outermost `using` carries down its async calls: who we are, what we hold. */
interface Holding {
  readonly owner: string;
  readonly held: Map<string, Held>;
}

/** One held key of a Holding: the hold its sections get, and how to declare it lost. */
interface Held {
  readonly hold: Hold;
  lose(why: string): void;
}

/**
 * `reentrant` — Redisson's RLock, in Node.
 *
 * - The lock is a hash: field = owner id, value = hold count. Acquire (HINCRBY +
 *   PEXPIRE) and release (HINCRBY -1, DEL at zero) are Lua scripts, so the same
 *   owner may take the lock again while holding it: a section that calls code which
 *   locks the same key again re-enters (count 2, then 1, then free) instead of
 *   waiting for itself forever. Redisson's owner is uuid:threadId; here it is the
 *   process id + the async context of the outermost `using`, carried by
 *   AsyncLocalStorage.
 * - Watchdog (Redisson's lockWatchdogTimeout): while held, the TTL is renewed every
 *   TTL/3 by reentrant-renew-1.lua: the timer is unref'd, a tick is skipped while the
 *   previous renewal is still in flight (never two at once), it stops on release.
 *   A renewal that finds the lock gone, or fails, aborts the holder's AbortSignal
 *   and is counted in lostLocks: the holder must not write. The hold's validity is
 *   also a clock: it ends a TTL (minus drift) after the last confirmed renewal, and
 *   assertValid() checks it before a write, whether or not a timer could run.
 * - Re-entry requires still owning the lock (reentrant-reenter-1.lua): a lost outer
 *   hold is not silently replaced by a fresh one; it is counted and refused.
 * - Waiting: release SPUBLISHes on the lock's channel and the waiter at the head of
 *   this process's line wakes on it (ReleaseSubscriber) instead of polling; each
 *   wait is bounded by the other lock's PTTL, the wait budget, and 1 s.
 * - An acquisition that fails without a reply (timed out, connection lost) may still
 *   have run: one release step follows it on the connection (BestEffortUndo), so it
 *   cannot leave a lock nobody holds.
 *
 * What can go wrong: a holder paused longer than the TTL misses its renewals and
 * loses the lock while paused; it learns that only on resume (its signal aborts),
 * so a write already in flight can still land. Fencing closes that gap.
 */
export class ReentrantStrategy implements Lock {
  private readonly logger = new Logger('ReentrantLock');
  private readonly process = randomBytes(8).toString('hex');
  private readonly context = new AsyncLocalStorage<Holding>();
  private readonly line = new LocalQueue();
  private readonly subscriber: ReleaseSubscriber;
  private readonly undo = new BestEffortUndo(this.logger);
  private contexts = 0;
  private lost = 0;
  /** Successful watchdog renewals (for tests and curiosity). */
  renewals = 0;

  constructor(
    private readonly redis: RedisClient,
    private readonly options: ReentrantOptions,
  ) {
    this.subscriber = ReleaseSubscriber.of(redis);
  }

  get lostLocks(): number {
    return this.lost;
  }

  /** Release messages that woke a waiter before its bounded wait ran out. */
  get wakeups(): number {
    return this.subscriber.wakeups;
  }

  async using<T>(key: string, section: (hold: Hold) => Promise<T>, options?: UsingOptions): Promise<T> {
    const holding = this.context.getStore();
    const held = holding?.held.get(key);
    if (holding && held) return this.reenter(holding.owner, key, held, section);
    // Outermost acquisition in this async context: a new owner.
    const mine: Holding = holding ?? { owner: `${this.process}:${++this.contexts}`, held: new Map() };
    const deadline = options?.deadline ?? performance.now() + this.options.waitMs;
    await this.line.enter(key, deadline - performance.now(), options?.signal);
    try {
      const takenAt = await this.acquire(key, mine.owner, deadline, options?.signal);
      const lost = new AbortController();
      let validUntil = takenAt + this.options.ttlMs - driftMs(this.options.ttlMs);
      const lose = (why: string) => {
        if (lost.signal.aborted) return;
        this.lost++;
        this.logger.warn(`lock ${key} lost: ${why}`);
        lost.abort(new LockExpiredError(this.options.ttlMs));
      };
      const hold: Hold = {
        signal: lost.signal,
        assertValid: () => {
          if (!lost.signal.aborted && performance.now() >= validUntil) {
            lost.abort(new LockExpiredError(this.options.ttlMs));
          }
          lost.signal.throwIfAborted();
        },
      };
      const watchdog = this.startWatchdog(key, mine.owner, lose, (renewedAt) => {
        validUntil = renewedAt + this.options.ttlMs - driftMs(this.options.ttlMs);
      });
      mine.held.set(key, { hold, lose });
      try {
        return await this.context.run(mine, () => section(hold));
      } finally {
        mine.held.delete(key);
        watchdog.stop();
        await this.release(key, mine.owner);
      }
    } finally {
      this.line.leave(key);
    }
  }

  async close(): Promise<void> {
    await this.subscriber.close();
  }

  /**
   * Same owner, lock held by the outer section: count it up (only if still ours), run,
   * count it down. A re-entry that failed without a reply (timed out, connection lost)
   * may still run and count one hold nobody will leave: the lock would outlive every
   * section by a TTL, and block the product. As for an acquisition, the undo follows it
   * on the connection, but here one release step could take the outer hold's count
   * instead (if the re-entry never ran), so the outer hold is declared lost (its section
   * may not write) and the undo leaves all of this owner's holds at once.
   */
  private async reenter<T>(owner: string, key: string, held: Held, section: (hold: Hold) => Promise<T>) {
    held.hold.assertValid();
    const reentered = await reentrantReenter.run(this.redis, [key], owner, this.options.ttlMs).catch((err: unknown) => {
      held.lose(`its re-entry got no answer (${(err as Error).message}); the lock is given up`);
      this.undo.fire(`re-entry of ${key}`, () =>
        reentrantRelease.runInFull(this.redis, [key], owner, this.options.ttlMs, releasedChannel(key), 'all'),
      );
      throw err;
    });
    if (reentered !== 1) {
      held.lose('it was gone when the holder re-entered it');
      held.hold.assertValid(); // throws: the outer hold is gone
    }
    try {
      return await section(held.hold);
    } finally {
      await this.release(key, owner);
    }
  }

  /** Resolves with performance.now() from before the attempt that took the lock: its validity counts from there. */
  private acquire(key: string, owner: string, deadline: number, signal?: AbortSignal): Promise<number> {
    // Subscribed before the first try, so a release between a try and its wait is not missed.
    return this.subscriber.retry(releasedChannel(key), async (): Promise<Attempt<number>> => {
      signal?.throwIfAborted();
      const at = performance.now();
      const otherTtl = await reentrantAcquire
        .run(this.redis, [key], owner, this.options.ttlMs)
        .catch((err: unknown) => {
          // Outcome unknown: the script may have counted us in (1, as we held nothing
          // here). One release step takes exactly that back, and nothing if it did not run.
          this.undo.fire(`acquisition of ${key}`, () =>
            reentrantRelease.runInFull(this.redis, [key], owner, this.options.ttlMs, releasedChannel(key), 'one'),
          );
          throw err;
        });
      if (otherTtl === null) return { got: at };
      const left = deadline - performance.now();
      if (left <= 0) throw new LockTimeoutError(this.options.waitMs);
      return { waitMs: Math.min(left, otherTtl > 0 ? otherTtl : MAX_WAIT_MS, MAX_WAIT_MS) };
    });
  }

  private async release(key: string, owner: string): Promise<void> {
    try {
      const result = await reentrantRelease.run(
        this.redis,
        [key],
        owner,
        this.options.ttlMs,
        releasedChannel(key),
        'one',
      );
      if (result === null) this.logger.warn(`lock ${key} was no longer ours at release`);
    } catch (err) {
      this.logger.warn(`release of ${key} failed, the TTL will free it: ${(err as Error).message}`);
    }
  }

  private startWatchdog(key: string, owner: string, lose: (why: string) => void, renewed: (at: number) => void) {
    let renewing = false;
    const timer = setInterval(
      () => {
        if (renewing) return; // never two renewals at once
        renewing = true;
        const at = performance.now();
        reentrantRenew
          .run(this.redis, [key], owner, this.options.ttlMs)
          .then(
            (ok) => {
              if (ok !== 1) return stop(lose('it was gone when the watchdog renewed it'));
              this.renewals++;
              renewed(at);
            },
            (err: Error) => stop(lose(`renewal failed: ${err.message}`)),
          )
          .finally(() => (renewing = false));
      },
      Math.max(1, Math.floor(this.options.ttlMs / 3)),
    );
    timer.unref();
    const stop = (_?: void) => clearInterval(timer);
    return { stop };
  }
}
