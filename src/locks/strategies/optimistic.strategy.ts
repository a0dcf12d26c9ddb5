import type { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { ContentionError } from '../../errors/domain-errors';
import { checkPurchase, OrderRequest, queueOrder, readSaleState } from '../../orders/sale-rules';
import { ConnectionPool } from '../../redis/connection-pool';
import type { ProductKeys } from '../../redis/key-layout';
import { backoffMs } from '../backoff';
import { LocalQueue } from '../local-queue';
import { LockFreeStrategy } from '../lock-strategy';

/** Dedicated connections per process; more would only add losers to every race. */
const POOL_SIZE = 8;
const MAX_ATTEMPTS = 200;
const BACKOFF_CAP_MS = 16;

/**
 * `optimistic` — no lock: WATCH the keys, read, check, then MULTI ... EXEC. If a
 * watched key changed after the WATCH, Redis refuses the whole transaction (EXEC
 * replies nil) and we try again after a jittered backoff, up to a bound.
 *
 * Where it comes from: Redis transactions (the seed articles on MULTI/EXEC/WATCH).
 * MULTI alone cannot implement check-then-write: commands are only queued, so no
 * result can be read mid-transaction to decide on. EXEC applies everything or, when
 * a WATCHed key changed, nothing. Two more lessons from the same articles:
 * - a command that fails to queue (a syntax error, a wrong number of arguments)
 *   makes EXEC abort the whole transaction;
 * - a command that fails when run (WRONGTYPE on a key of another type) does not roll
 *   the others back: Redis has no rollback, which is why execAll throws on any
 *   per-command error and why our transactions only touch keys of known types.
 *
 * What can go wrong: nothing that oversells; under a burst every sale invalidates
 * every concurrent attempt, so most work is thrown away and retried (the first
 * 100,000-buyer run had 620 buyers give up with 503 while stock remained). So in
 * each process attempts on one product take turns (a LocalQueue, as `lock` does)
 * and only processes race each other. WATCH must be on a connection of its own
 * (see ConnectionPool), never on the shared client.
 */
export class OptimisticStrategy implements LockFreeStrategy {
  readonly kind = 'lock-free';
  readonly name = 'optimistic';
  readonly unsafe = false;
  readonly reentrant = false;
  readonly lostLocks = 0;
  private readonly pool: ConnectionPool;
  private readonly line = new LocalQueue();
  /** EXECs refused because a watched key changed. */
  conflicts = 0;

  constructor(
    redis: Pick<Redis, 'duplicate'>,
    private readonly waitMs: number,
  ) {
    // The offline queue lets a fresh connection take commands while it connects;
    // the shared client's command timeout still bounds every call.
    this.pool = new ConnectionPool(() => redis.duplicate({
        enableOfflineQueue: true,
        // WATCH ... EXEC is one conversation per connection, sent exactly as written.
        enableAutoPipelining: false,
      }), POOL_SIZE);
  }

  async purchase(k: ProductKeys, order: OrderRequest, orderId: string, signal?: AbortSignal): Promise<number> {
    const deadline = Date.now() + this.waitMs;
    // One attempt per product at a time in this process: attempts of one process
    // would only invalidate each other (every sale changes the watched stock), so
    // they queue here and the races left are between processes.
    await this.line.enter(k.stock, this.waitMs, signal);
    try {
      for (let attempt = 1; ; attempt++) {
        const left = await this.pool.use(deadline, this.waitMs, (c) => this.attempt(c, k, order, orderId));
        if (left !== null) return left;
        this.conflicts++;
        if (attempt >= MAX_ATTEMPTS || Date.now() >= deadline) throw new ContentionError(attempt, this.waitMs);
        await sleep(backoffMs(attempt - 1, deadline - Date.now(), BACKOFF_CAP_MS));
      }
    } finally {
      this.line.leave(k.stock);
    }
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  /** One WATCH ... EXEC round; null when a watched key changed and nothing was applied. */
  private async attempt(c: Redis, k: ProductKeys, order: OrderRequest, orderId: string): Promise<number | null> {
    await c.watch(k.meta, k.stock, k.buyers);
    try {
      checkPurchase(order, await readSaleState(c, k, order.userId));
    } catch (err) {
      await c.unwatch();
      throw err;
    }
    const replies = await queueOrder(c.multi(), k, order, orderId).exec();
    if (replies === null) return null;
    const failed = replies.find(([err]) => err);
    if (failed) throw failed[0];
    return Number(replies[0][1]);
  }
}
