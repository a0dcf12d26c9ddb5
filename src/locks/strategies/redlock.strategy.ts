import { Logger } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { ExecutionError, Redlock, Lock as RedlockLease } from '@sesamecare-oss/redlock';
import { setTimeout as sleep } from 'node:timers/promises';
import { LockNodesUnavailableError, LockTimeoutError } from '../../errors/errors';
import { closeRedisClient, COMMAND_TIMEOUT_MS, createRedisClient } from '../../redis/create-client';
import { isRedisUnavailable } from '../../redis/redis-errors';
import { backoffMs } from '../backoff';
import { holdInLine, Lease } from '../hold-in-line';
import { LocalQueue } from '../local-queue';
import { Hold, Lock, LockNodes, UsingOptions } from '../lock';

export interface RedlockOptions {
  readonly ttlMs: number;
  readonly waitMs: number;
}

/**
 * How long one lock node may take to answer: a timeout "small compared to the total
 * lock auto-release time" (redis.io's Redlock: 5-50 ms for a 10 s TTL), so a node that
 * is paused or black-holed cannot hold up the others. redlock 5.0.0-beta.2 awaited every
 * node's vote, so with the client's 2 s command timeout one hung node slowed every attempt
 * by 2 s, ate 2 s of each lease's validity, and with a TTL under 2 s left no lease valid
 * at all; the fork answers at a quorum, but a refused attempt still waits for every vote
 * (to tell a node that is down from a lock that is taken). 1/50 of the TTL, from 20 ms (a loaded machine's round trip) to the 2 s cap: a
 * hung node costs each attempt at most 2% of the validity.
 */
export function redlockNodeTimeoutMs(ttlMs: number): number {
  return Math.min(COMMAND_TIMEOUT_MS, Math.max(20, Math.floor(ttlMs / 50)));
}

/** Clients of the lock nodes, as the app makes them: each with redlockNodeTimeoutMs. */
export function createRedlockNodes(urls: readonly string[], ttlMs: number): Redis[] {
  const commandTimeout = redlockNodeTimeoutMs(ttlMs);
  // No auto-pipelining: with the package's defineCommand scripts, ioredis 6's auto-pipeline
  // once got fewer replies than commands and threw "results[i] is not iterable" from a
  // nextTick (an uncaught TypeError, which ends the process), in the two-app redlock
  // test; each acquisition sends one script per node, so there is little to batch.
  return urls.map((url, i) =>
    createRedisClient(url, `Redlock node ${i + 1}`, { commandTimeout, enableAutoPipelining: false }),
  );
}

/** A granted lock, with when we asked for it and until when it is valid. */
interface Held extends Lease {
  readonly lock: RedlockLease;
}

/**
 * `redlock` — Redlock over N independent Redis nodes (redis.io "Distributed Locks";
 * the seed articles' last scheme), using `@sesamecare-oss/redlock`, the maintained fork
 * of node-redlock v5.
 *
 * - Acquire: the same SET NX PX with a random value on every node at once; the lock
 *   is ours only if a majority (N/2 + 1) said yes, and only for its validity time:
 *   TTL minus the time acquiring took minus clock drift (1% + 2 ms). Otherwise the
 *   package releases what it got and we retry with backoff until LOCK_WAIT_MS.
 * - Release: compare-and-delete on every node (the package's Lua script). As with
 *   `lock`, callers for one key queue in-process and only the head contends.
 * - The stock and orders stay on REDIS_URL; only the lock lives on the N nodes, so
 *   one lock node down changes nothing, and a majority down stops all sales with
 *   503 LOCK_NODES_UNAVAILABLE (no quorum), never an oversell.
 *
 * Why the fork: `redlock` 5.0.0-beta.2 (the newest with types and ioredis clients) has
 * not moved in years; the fork keeps its API, takes ioredis 5 and 6 clients, and
 * answers an acquisition as soon as a quorum has voted.
 * What can go wrong: Redlock assumes bounded clock drift and pauses; a holder
 * paused past the validity time can still write late (Kleppmann's critique), so
 * the write is skipped once the validity has passed, and fencing closes the rest.
 */
export class RedlockStrategy implements Lock {
  private readonly logger = new Logger('Redlock');
  private readonly redlock: Redlock;
  private readonly line = new LocalQueue();
  private readonly quorum: number;
  private lost = 0;

  constructor(
    private readonly clients: Redis[],
    private readonly options: RedlockOptions,
  ) {
    // Our own loop retries (bounded by the wait budget and the caller's signal), so
    // each package call makes exactly one attempt.
    this.redlock = new Redlock(clients, { retryCount: 0, driftFactor: 0.01 });
    this.quorum = Math.floor(clients.length / 2) + 1;
  }

  get lostLocks(): number {
    return this.lost;
  }

  using<T>(key: string, section: (hold: Hold) => Promise<T>, options?: UsingOptions): Promise<T> {
    return holdInLine<Held, T>(
      {
        line: this.line,
        key,
        ttlMs: this.options.ttlMs,
        deadline: options?.deadline ?? performance.now() + this.options.waitMs,
        signal: options?.signal,
        onWait: options?.onWait,
        acquire: async (deadline, waiting) => {
          const lock = await this.acquire(key, deadline, waiting, options?.signal);
          // The package counts its validity on the wall clock (Date.now()); ours is
          // monotonic, so a clock stepped back cannot stretch it: the time left, now.
          return { validUntil: performance.now() + (lock.expiration - Date.now()), lock };
        },
        release: (held) => this.release(held.lock),
      },
      // Not fenced: the section gets the validity (its signal, and the clock check) only.
      (validity) => section(validity),
    );
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.map(closeRedisClient));
  }

  async nodes(): Promise<LockNodes> {
    const answers = await Promise.all(
      this.clients.map((n) =>
        n.ping().then(
          () => 1,
          () => 0,
        ),
      ),
    );
    return { up: answers.reduce<number>((a, b) => a + b, 0), total: this.clients.length, quorum: this.quorum };
  }

  private async acquire(
    key: string,
    deadline: number,
    waiting: () => void,
    signal?: AbortSignal,
  ): Promise<RedlockLease> {
    for (let attempt = 0; ; attempt++) {
      signal?.throwIfAborted();
      try {
        return await this.redlock.acquire([key], this.options.ttlMs);
      } catch (err) {
        if (!(err instanceof ExecutionError)) throw err;
        const down = await this.unreachable(err);
        if (this.clients.length - down < this.quorum)
          throw new LockNodesUnavailableError(down, this.clients.length, this.quorum);
      }
      waiting();
      const left = deadline - performance.now();
      if (left <= 0) throw new LockTimeoutError(this.options.waitMs);
      await sleep(backoffMs(attempt, left));
    }
  }

  /** How many nodes voted against because they could not be reached (not because the lock was taken). */
  private async unreachable(err: ExecutionError): Promise<number> {
    let down = 0;
    for (const attempt of err.attempts) {
      const stats = await attempt.catch(() => null);
      if (!stats) continue;
      down = Math.max(down, [...stats.votesAgainst.values()].filter(isRedisUnavailable).length);
    }
    return down;
  }

  private async release(lock: RedlockLease): Promise<void> {
    try {
      await lock.release();
    } catch (err) {
      // No majority confirmed the release: on those nodes the lock had already
      // expired (or they are down); either way the hold was not ours to the end.
      this.lost++;
      this.logger.warn(
        `release of ${lock.resources.join(',')} was not confirmed by a majority: ${(err as Error).message}`,
      );
    }
  }
}
