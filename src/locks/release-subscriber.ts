import { closeRedisClient, duplicateClient, type RedisClient } from '../redis/create-client';

interface Channel {
  /** Messages seen so far: a waiter that read it before its attempt knows if it missed one. */
  generation: number;
  members: number;
  readonly wake: Set<() => void>;
  /** The SSUBSCRIBE of this channel, while it has not failed: a failed one is forgotten, so the next join sends it again. */
  subscribed?: Promise<void>;
}

/**
 * Where a lock's release script announces that `lockKey` is free: a shard channel
 * (SPUBLISH) with the lock key's hash tag, so on a Redis Cluster the message stays on
 * the product's own shard instead of being broadcast to every node.
 */
export function releasedChannel(lockKey: string): string {
  return `${lockKey}:released`;
}

/** One try: the thing wanted, or how long to wait at most before the next try. */
export type Attempt<T> = { readonly got: T } | { readonly waitMs: number };

/**
 * Waiting by pub/sub instead of polling (Redisson's LockPubSub): the release script
 * SPUBLISHes on the lock's channel, and whoever waits wakes at once. One subscriber
 * client per process (on a cluster, ioredis keeps one connection per shard); a channel
 * is subscribed (SSUBSCRIBE, Redis 7 sharded pub/sub) while anyone waits on it.
 */
export class ReleaseSubscriber {
  /**
   * How the subscriber connection is duplicated from the app's client: commands wait
   * in the offline queue while it connects, one at a time as written, and no ready
   * check: ioredis sends a SUBSCRIBE issued between 'connect' and its INFO ready check
   * at once, the check's reply then finds the connection in subscriber mode, and the
   * first SUBSCRIBE still queued is rejected (a buyer's 500).
   */
  static readonly CONNECTION_OPTIONS = {
    enableOfflineQueue: true,
    enableAutoPipelining: false,
    enableReadyCheck: false,
  } as const;

  private connection?: RedisClient;
  private readonly channels = new Map<string, Channel>();
  /** Waits ended by a release message rather than by their timeout. */
  wakeups = 0;

  constructor(private readonly create: () => RedisClient) {}

  /**
   * A subscriber for the release messages of locks on `client`'s Redis: its own client,
   * made on first use. On a cluster, ioredis' sharded subscribers send each SSUBSCRIBE
   * to the shard that owns the channel's slot, and follow the slot when it moves.
   */
  static of(client: RedisClient): ReleaseSubscriber {
    return new ReleaseSubscriber(() =>
      duplicateClient(client, ReleaseSubscriber.CONNECTION_OPTIONS, 'Lock release subscriber', {
        shardedSubscribers: true,
      }),
    );
  }

  /**
   * Subscribes to `channel` while anyone waits on it; resolves once Redis confirms,
   * rejects if the SSUBSCRIBE failed. A failed one is forgotten but the channel's
   * members are kept (their waits still end at `waitMs`), and the next join sends
   * SSUBSCRIBE again.
   */
  async join(channel: string): Promise<void> {
    let state = this.channels.get(channel);
    if (!state) {
      state = { generation: 0, members: 0, wake: new Set() };
      this.channels.set(channel, state);
    }
    state.members++;
    if (!state.subscribed) {
      const attempt = this.subscriber()
        .ssubscribe(channel)
        .then(() => undefined);
      const joined = state;
      joined.subscribed = attempt;
      attempt.catch(() => {
        if (joined.subscribed === attempt) joined.subscribed = undefined;
      });
    }
    await state.subscribed;
  }

  leave(channel: string): void {
    const state = this.channels.get(channel);
    if (!state || --state.members > 0) return;
    this.channels.delete(channel);
    void this.connection?.sunsubscribe(channel).catch(() => undefined);
  }

  /**
   * Calls `attempt` until it gets what it wants, subscribed to `channel` meanwhile:
   * after each miss, waits for the next release message or the attempt's `waitMs`,
   * whichever comes first. The message count is read before each try, so a release
   * during the try is not missed. `attempt` throws to give up.
   */
  async retry<T>(channel: string, attempt: () => Promise<Attempt<T>>): Promise<T> {
    // Not awaited: the message only cuts short a wait that `waitMs` bounds anyway, so a
    // subscription slow to answer must not hold the waiter up. On a cluster it can be:
    // right after the channel's slot moved to another master, ioredis' sharded
    // subscriber may not answer until its slot map catches up, and a buyer batch that
    // waited for it was answered 503 at the command timeout (the slot-move fault).
    void this.join(channel).catch(() => undefined);
    try {
      for (;;) {
        const seen = this.generation(channel);
        const outcome = await attempt();
        if ('got' in outcome) return outcome.got;
        await this.wait(channel, seen, outcome.waitMs);
      }
    } finally {
      this.leave(channel);
    }
  }

  /** The channel's message count now; pass it to `wait` to not miss one that arrives in between. */
  generation(channel: string): number {
    return this.channels.get(channel)?.generation ?? 0;
  }

  /** Resolves on the next release message after `seen`, or after `ms`. */
  wait(channel: string, seen: number, ms: number): Promise<void> {
    const state = this.channels.get(channel);
    if (!state || state.generation !== seen) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        state.wake.delete(wake);
        resolve();
      };
      const timer = setTimeout(() => {
        state.wake.delete(wake);
        resolve();
      }, ms);
      state.wake.add(wake);
    });
  }

  async close(): Promise<void> {
    const c = this.connection;
    this.connection = undefined;
    if (c) await closeRedisClient(c);
  }

  private subscriber(): RedisClient {
    if (!this.connection) {
      this.connection = this.create();
      // Its errors are not news: the app's own client reports an outage, and a waiter
      // without messages still polls. Unheard, an 'error' kills the process: on a
      // cluster, the sharded subscriber emits one when it cannot reach a failed master.
      this.connection.on('error', () => undefined);
      this.connection.on('smessage', (channel: string) => {
        const state = this.channels.get(channel);
        if (!state) return;
        state.generation++;
        if (state.wake.size > 0) this.wakeups++;
        for (const wake of [...state.wake]) wake();
      });
    }
    return this.connection;
  }
}
