import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis, ReplyError, type RedisOptions } from 'ioredis';
import { ConnectionPool } from './connection-pool';
import type { RedisClient } from './create-client';

/**
 * Connections of their own for WATCH ... EXEC, lent one caller at a time (see
 * ConnectionPool for why WATCH cannot share one). Standalone, they are duplicates of
 * the app's client. On a Redis Cluster, they are plain connections to the master that
 * owns the keys' slot, one pool per master: a WATCH, the reads and the EXEC must all
 * reach that one node on that one connection. ioredis' Cluster client would follow a
 * MOVED on the EXEC to the slot's new owner, where nothing is watched, and run the
 * transaction unchecked.
 *
 * When the slot moves, the old owner answers the WATCH, a read or a queued command
 * with MOVED or ASK (the EXEC then with EXECABORT): nothing was applied. `use` reports
 * that as `moved` after asking the cluster client to relearn the slot map, and the
 * caller tries again, now on the new owner.
 */
export class WatchConnections {
  private readonly pools = new Map<string, ConnectionPool>();

  constructor(
    private readonly client: RedisClient,
    private readonly options: Partial<RedisOptions>,
    private readonly perNode: number,
  ) {}

  /** Runs `fn` on a connection to the node that serves `key`; resolves `moved` if the slot moved under it. */
  async use<T>(
    key: string,
    deadline: number,
    timedOut: () => Error,
    fn: (connection: Redis) => Promise<T>,
  ): Promise<T | typeof moved> {
    try {
      return await this.pool(key).use(deadline, timedOut, fn);
    } catch (err) {
      if (!(this.client instanceof Cluster) || !isRedirect(err)) throw err;
      this.client.refreshSlotsCache();
      return moved;
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
  }

  private dropPoolsOtherThan(serving: Set<string | undefined>): void {
    for (const [node, pool] of this.pools) {
      if (serving.has(node)) continue;
      this.pools.delete(node);
      void pool.close();
    }
  }

  private pool(key: string): ConnectionPool {
    const client = this.client;
    const node = client instanceof Cluster ? nodeOf(client, key) : '';
    let pool = this.pools.get(node);
    if (!pool) {
      // A new owner: the pools of nodes that serve no slot any more (failed over, emptied
      // by a slot move) are closed instead of kept for ever.
      if (client instanceof Cluster) this.dropPoolsOtherThan(new Set(client.slots.map((owners) => owners?.[0])));
      pool = new ConnectionPool(
        client instanceof Cluster ? () => connect(client, node, this.options) : () => client.duplicate(this.options),
        this.perNode,
      );
      this.pools.set(node, pool);
    }
    return pool;
  }
}

/** What `use` resolves when the slot moved and nothing was applied. */
export const moved = Symbol('moved');

/** `host:port` of the master that serves `key` in `cluster`'s slot map. */
function nodeOf(cluster: Cluster, key: string): string {
  const node = cluster.slots[calculateSlot(key)]?.[0];
  // The same words ioredis uses, so the buyer gets 503 REDIS_UNAVAILABLE (redis-errors.ts).
  if (!node) throw new Error(`Cluster isn't ready: no node serves the slot of ${key} yet`);
  return node;
}

/**
 * A connection to one cluster node that does not reconnect: if the node goes away its
 * slots go to another, where the pool for the new owner connects, and this one ends
 * (ConnectionPool drops ended connections). Its errors are the command's to report.
 */
function connect(cluster: Cluster, node: string, options: Partial<RedisOptions>): Redis {
  const at = node.lastIndexOf(':');
  const connection = new Redis({
    ...cluster.options.redisOptions,
    ...options,
    host: node.slice(0, at),
    port: Number(node.slice(at + 1)),
    retryStrategy: () => null,
  });
  connection.on('error', () => undefined);
  return connection;
}

/** MOVED, ASK or TRYAGAIN, directly or as the reason an EXEC was aborted: the node ran nothing. */
function isRedirect(err: unknown): boolean {
  if (!(err instanceof ReplyError)) return false;
  const redirect = (e: unknown) => e instanceof Error && /^(MOVED|ASK|TRYAGAIN)\b/.test(e.message);
  if (redirect(err)) return true;
  const { message, previousErrors } = err as Error & { previousErrors?: unknown[] };
  return /^EXECABORT\b/.test(message) && (previousErrors ?? []).some(redirect);
}
