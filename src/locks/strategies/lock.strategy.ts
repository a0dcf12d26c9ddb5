import { Logger } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import type { RedisClient } from '../../redis/create-client';
import { LockTimeoutError } from '../../errors/errors';
import { releaseLock } from '../../redis/lua-scripts';
import { backoffMs } from '../backoff';
import { BestEffortUndo } from '../best-effort-undo';
import { holdInLine, Lease } from '../hold-in-line';
import { LocalQueue } from '../local-queue';
import { driftMs } from '../drift';
import { Hold, Lock, ReadAtAcquire, UsingOptions } from '../lock';
import { Attempt, releasedChannel, ReleaseSubscriber } from '../release-subscriber';

export interface LockOptions {
  /** Lock TTL: how long a crashed holder can block the product. */
  readonly ttlMs: number;
  /** How long `acquire` keeps trying before LockTimeoutError. */
  readonly waitMs: number;
}

/** A held lock: the key, our token, and until when we may trust the hold. */
export interface LockLease extends Lease {
  readonly key: string;
  readonly token: string;
  /** The fencing token of this acquisition, when the lock is fenced. */
  readonly fence?: number;
  /** What was read in the step that took the lock (Hold.read), when the lock can. */
  readonly read?: readonly unknown[];
}

/** What one try got: true (the lock), the fencing token and read of a fenced lock, or null (held). */
export type Taken = true | { readonly fence: number; readonly read?: readonly unknown[] } | null;

/**
 * `lock` — the correct single-instance Redis lock (redis.io "Distributed Locks";
 * `SET key token NX PX ttl` since Redis 2.6.12).
 *
 * - Acquire: one atomic `SET NX PX` with a token (the owner's pid and 128 random
 *   bits), so the lock never exists without its TTL (a crash cannot leave it
 *   forever) and only the client holding the token can claim to own it.
 * - Release: release-lock-1.lua compares the token and deletes in one step; never a
 *   plain DEL, which would delete another owner's lock after ours expired.
 * - Wait: in this process, callers for one key queue in a LocalQueue and only the
 *   head contends. It tries SET NX, and while another process holds the lock it
 *   waits for the release message (release-lock SPUBLISHes it), with a jittered
 *   timeout only for a lock that expires instead; one deadline bounds both waits, so
 *   other processes' holders are not drowned in retries.
 * - Validity: the hold is trusted for TTL minus a clock-drift allowance (Redlock's
 *   formula); after that the section's AbortSignal fires and the write is skipped.
 * - A SET NX that fails without a reply (timed out, connection lost) may still have
 *   run: compare-and-delete of its token follows it on the connection (BestEffortUndo),
 *   so it cannot leave a lock nobody holds for the next buyer to wait out.
 *
 * What can still go wrong: a holder paused longer than the TTL between its check
 * of the signal and its write (GC, SIGSTOP) can write after another holder took the
 * lock. Only fencing tokens close that gap.
 */
export class SetNxLockStrategy implements Lock {
  protected readonly logger = new Logger('SetNxLock');
  /** Releases that found the lock no longer ours: each one is a hold that outlived its TTL. */
  protected lost = 0;
  /** Buyers of one product in this process queue here; only the head sends SET NX. */
  private readonly line = new LocalQueue();
  /** One subscriber connection per process, for the release messages of locks we wait for. */
  private readonly subscriber: ReleaseSubscriber;
  private readonly undo = new BestEffortUndo(this.logger);

  constructor(
    private readonly redis: RedisClient,
    protected readonly options: LockOptions,
  ) {
    this.subscriber = ReleaseSubscriber.of(redis);
  }

  /** Release messages that woke a waiting contender before its fallback timeout. */
  get wakeups(): number {
    return this.subscriber.wakeups;
  }

  async close(): Promise<void> {
    await this.subscriber.close();
  }

  get lostLocks(): number {
    return this.lost;
  }

  /** One attempt: a lease if the lock was free, null if someone holds it. `read`: see Hold.read. */
  async tryAcquire(key: string, read?: ReadAtAcquire): Promise<LockLease | null> {
    // 128 random bits make it unguessable and unique; the pid in front says which
    // process holds the lock (as Redisson's uuid:threadId does), for an operator
    // reading the key and for the fault suite that stops or kills the holder.
    const token = `${process.pid}:${randomBytes(16).toString('hex')}`;
    const start = performance.now();
    const taken = await this.take(key, token, read).catch((err: unknown) => {
      // Outcome unknown: the lock may be ours in Redis. Release it if so.
      this.undo.fire(`acquisition of ${key}`, () =>
        releaseLock.runInFull(this.redis, [key], token, releasedChannel(key)),
      );
      throw err;
    });
    if (taken === null) return null;
    // Measured from before the SET: the lock may have been set at any point of the round trip.
    const validUntil = start + this.options.ttlMs - driftMs(this.options.ttlMs);
    return taken === true ? { key, token, validUntil } : { key, token, validUntil, ...taken };
  }

  /**
   * SET NX PX: true if the lock is now ours, null if someone holds it (a fenced lock
   * returns its token instead of true, and takes `read` with it). The plain SET takes
   * no read: the section reads itself.
   */
  protected async take(key: string, token: string, _read?: ReadAtAcquire): Promise<Taken> {
    return (await this.redis.set(key, token, 'PX', this.options.ttlMs, 'NX')) === 'OK' ? true : null;
  }

  /**
   * Retries until the lock is ours, `waitMs` has passed (LockTimeoutError), or
   * `signal` aborts (its reason is thrown).
   */
  acquire(key: string, waitMs = this.options.waitMs, signal?: AbortSignal): Promise<LockLease> {
    return this.acquireBy(key, performance.now() + waitMs, { signal });
  }

  private async acquireBy(
    key: string,
    deadline: number,
    { signal, waiting, read }: { signal?: AbortSignal; waiting?: () => void; read?: ReadAtAcquire },
  ): Promise<LockLease> {
    signal?.throwIfAborted();
    const first = await this.tryAcquire(key, read);
    if (first) return first;
    waiting?.();
    // No time left (LOCK_WAIT_MS=0 means "try once"): that was the one try.
    if (performance.now() >= deadline) throw new LockTimeoutError(this.options.waitMs);
    // Taken: listen for its release (release-lock-1.lua publishes it), so we try again
    // the moment it is freed, not after a poll interval.
    let attempt = 0;
    return this.subscriber.retry(releasedChannel(key), async (): Promise<Attempt<LockLease>> => {
      signal?.throwIfAborted();
      const lease = await this.tryAcquire(key, read);
      if (lease) return { got: lease };
      const left = deadline - performance.now();
      if (left <= 0) throw new LockTimeoutError(this.options.waitMs);
      // Only the fallback for a lock that expires instead of being released (its
      // holder died): then nobody publishes.
      return { waitMs: backoffMs(attempt++, left, EXPIRY_POLL_CAP_MS) };
    });
  }

  /** Compare-and-delete. False (logged, counted) when the lock was no longer ours. */
  async release(lease: LockLease): Promise<boolean> {
    const deleted = await releaseLock.run(this.redis, [lease.key], lease.token, releasedChannel(lease.key));
    if (deleted === 1) return true;
    this.lost++;
    this.logger.warn(`lock ${lease.key} was no longer ours at release: ${this.whyLost(lease)}`);
    return false;
  }

  /** What the release's warning says of a hold found lost: one line per lost hold, so a subclass that knows more says it here. */
  protected whyLost(_lease: LockLease): string {
    return `the hold outlived its TTL of ${this.options.ttlMs} ms`;
  }

  using<T>(key: string, section: (hold: Hold) => Promise<T>, options?: UsingOptions): Promise<T> {
    return holdInLine(
      {
        line: this.line,
        key,
        ttlMs: this.options.ttlMs,
        deadline: options?.deadline ?? performance.now() + this.options.waitMs,
        signal: options?.signal,
        onWait: options?.onWait,
        acquire: (deadline, waiting) =>
          this.acquireBy(key, deadline, { signal: options?.signal, waiting, read: options?.readAtAcquire }),
        // A failed release must not turn a completed purchase into an error: the
        // order is written either way, and the TTL frees the lock.
        release: (lease) =>
          this.release(lease).then(
            () => undefined,
            (err: Error) => this.logger.warn(`release of ${key} failed, the TTL will free it: ${err.message}`),
          ),
      },
      (validity, lease) => section({ ...validity, fence: lease.fence, read: lease.read }),
    );
  }
}

/** Longest wait between tries when no release message comes (the holder died: its lock expires). */
const EXPIRY_POLL_CAP_MS = 250;
