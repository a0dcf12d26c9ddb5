import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { saleClock } from '../../settings/lessons.config';
import { strategyFamily } from '../../settings/strategy.config';
import { PURCHASE_CONFIG, PurchaseConfig } from '../orders.config';
import { ContentionError, IdempotencyKeyInUseError } from '../../errors/errors';
import { backoffMs } from '../../locks/backoff';
import { LocalQueue } from '../../locks/local-queue';
import type { RedisClient } from '../../redis/create-client';
import { KeyLayout, ProductKeys } from '../../redis/key-layout';
import { REDIS_CLIENT } from '../../redis/redis.constants';
import { moved, WatchConnections } from '../../redis/watch-connections';
import { FaultStop } from '../fault-stop';
import { acknowledge, newOrderId, Order, OrderRequest } from '../order';
import { refusal } from '../sale-rules';
import { keyedWrite, keyedWriteKeys } from '../../redis/lua-scripts';
import {
  buyerState,
  keyedWriteArgs,
  keyedWriteLeft,
  orderWrite,
  readSale,
  SaleRead,
  skippedError,
  stillClaimed,
} from '../sale-store';
import { PurchasePath, PurchaseStatus } from './purchase-path';
import { SoldOutSignals } from './sold-out-signals';

/** Dedicated connections per process (per master on a cluster); more would only add losers to every race. */
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
@Injectable()
export class OptimisticPurchases extends PurchasePath implements OnApplicationShutdown {
  private readonly pool: WatchConnections;
  private readonly waitMs: number;
  /** SALE_CLOCK=app: the naive window check (saleClock()). */
  private readonly clock: ((redisNow: number) => number) | undefined;
  /** strategyFamily() of LOCK_STRATEGY: a sale started by another family is refused. */
  private readonly family: string;
  private readonly soldOut = new SoldOutSignals();
  /** Attempts that found their wait budget spent while queued behind this process's others. */
  private readonly line = new LocalQueue((waitMs) => new ContentionError(0, waitMs));
  /** EXECs refused because a watched key changed. */
  conflicts = 0;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
    @Inject(PURCHASE_CONFIG.token) config: PurchaseConfig,
    private readonly faults: FaultStop,
  ) {
    super();
    this.waitMs = config.lockWaitMs;
    this.clock = saleClock(config);
    this.family = strategyFamily(config.lockStrategy);
    // No offline queue: a command queued while a connection reconnects, then timed
    // out, would still be sent when it comes back (a late EXEC). The pool lends a
    // connection only once it is ready. On a cluster each connection goes to the
    // product's master (WatchConnections).
    this.pool = new WatchConnections(
      redis,
      {
        enableOfflineQueue: false,
        // WATCH ... EXEC is one conversation per connection, sent exactly as written.
        enableAutoPipelining: false,
      },
      POOL_SIZE,
    );
  }

  async purchase(order: OrderRequest): Promise<Order> {
    const k = this.keys.product(order.productId);
    // Unlocked pre-check, for refusals only: a sold-out product never queues.
    const { saleId } = this.check(order, await readSale(this.redis, k, this.family, [order.userId], [], this.clock));
    const orderId = newOrderId(order.productId);
    const { remaining, saleId: soldIn } = await this.attempts(k, order, orderId, saleId);
    if (remaining <= 0) this.soldOut.soldOut(order.productId, soldIn);
    return acknowledge(order, orderId, remaining);
  }

  /** WATCH aborts a purchase whose keys a reset changed, so the reset needs nothing more. */
  exclusive<T>(_productId: string, fn: (fence?: number) => Promise<T>): Promise<T> {
    return fn();
  }

  status(): Promise<PurchaseStatus> {
    return Promise.resolve({ lostLocks: 0 });
  }

  onApplicationShutdown(): Promise<void> {
    return this.pool.close();
  }

  /** The stock left after the order, and the sale it was written in. `saleId`: the sale the buyer waits in. */
  private async attempts(
    k: ProductKeys,
    order: OrderRequest,
    orderId: string,
    saleId: string,
  ): Promise<{ remaining: number; saleId: string }> {
    const deadline = performance.now() + this.waitMs;
    // One attempt per product at a time in this process: attempts of one process
    // would only invalidate each other (every sale changes the watched stock), so
    // they queue here and the races left are between processes.
    await this.line.enter(k.stock, this.waitMs, this.soldOut.signal(order.productId, saleId));
    try {
      for (let attempt = 1; ; attempt++) {
        const left = await this.pool.use(
          k.stock,
          deadline,
          () => new ContentionError(attempt - 1, this.waitMs),
          (c) => this.attempt(c, k, order, orderId),
        );
        // A slot that moved counts as a conflict: nothing was applied, try again on its new master.
        if (left !== null && left !== moved) return left;
        this.conflicts++;
        if (attempt >= MAX_ATTEMPTS || performance.now() >= deadline) throw new ContentionError(attempt, this.waitMs);
        await sleep(backoffMs(attempt - 1, deadline - performance.now(), BACKOFF_CAP_MS));
      }
    } finally {
      this.line.leave(k.stock);
    }
  }

  /** Throws the refusal that applies to `read`, if any (a sold-out one wakes that sale's waiters); else returns the sale read. */
  private check(order: OrderRequest, read: SaleRead): NonNullable<SaleRead['sale']> {
    const no = refusal(order, buyerState(read, 0));
    if (!no) return read.sale!;
    this.soldOut.notice(order.productId, read.sale?.saleId ?? '', no);
    throw no;
  }

  /**
   * One WATCH ... EXEC round; null when a watched key changed and nothing was applied.
   * Every order changes the watched stock, so an EXEC that arrives late (its answer was
   * lost, a retry with the same Idempotency-Key bought meanwhile) is refused by Redis.
   */
  private async attempt(
    c: Redis,
    k: ProductKeys,
    order: OrderRequest,
    orderId: string,
  ): Promise<{ remaining: number; saleId: string } | null> {
    await c.watch(k.meta, k.stock, k.buyers);
    let read: SaleRead;
    try {
      read = await readSale(c, k, this.family, [order.userId], [], this.clock);
      this.check(order, read);
      await this.checkClaim(c, k, order);
    } catch (err) {
      await c.unwatch();
      throw err;
    }
    // The write is keyed-write-7.lua (the order and its reservation, with Redis's clock
    // for the deadline, which a MULTI cannot read), sent in full inside the MULTI: an
    // EVALSHA the server does not know would fail at EXEC, after the WATCH let it in.
    const accepted = [{ order, orderId, remaining: read.sale!.stock - order.quantity }];
    // Decided, not yet written: the WATCH sees keys change, never time pass, so the write
    // itself judges the window again (keyed-write-7.lua).
    this.faults.reached('before-write');
    const multi = c.multi().eval(...keyedWrite.inFull(keyedWriteKeys(k), ...keyedWriteArgs(k, accepted, this.clock)));
    const replies = await orderWrite(multi.exec());
    if (replies === null) return null;
    const failed = replies.find(([err]) => err);
    if (failed) throw failed[0];
    const [left] = keyedWriteLeft(k, replies[0][1] as (number | string)[]);
    // The WATCH saw the claim ours, and EXEC ran only if nothing it watched changed.
    if (typeof left === 'string') throw skippedError(left);
    return { remaining: left, saleId: read.sale!.saleId };
  }

  /** For a request with an Idempotency-Key: its claim must still be its own (else another request decides the key). */
  private async checkClaim(c: Redis, k: ProductKeys, order: OrderRequest): Promise<void> {
    if (!order.claim) return;
    if (!stillClaimed(await c.hget(k.idem, order.claim.key), order.claim)) throw new IdempotencyKeyInUseError(0);
  }
}
