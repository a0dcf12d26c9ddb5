import { Inject, Injectable } from '@nestjs/common';
import type { RedisClient } from '../../redis/create-client';
import { Hold, Lock } from '../../locks/lock';
import { KeyLayout, ProductKeys } from '../../redis/key-layout';
import { REDIS_CLIENT } from '../../redis/redis.constants';
import { saleClock } from '../../settings/lessons.config';
import { strategyFamily } from '../../settings/strategy.config';
import { PURCHASE_CONFIG, PurchaseConfig } from '../orders.config';
import { FaultStop } from '../fault-stop';
import { IdempotencyKeyInUseError } from '../../errors/errors';
import { acknowledge, newOrderId, Order, OrderRequest } from '../order';
import { refusal } from '../sale-rules';
import { buyerState, readSale, skippedError, stillClaimed, writeOrders } from '../sale-store';
import { LockedPurchases } from './purchase-path';
import { SoldOutSignals } from './sold-out-signals';

/**
 * One buyer per hold: the purchase path of the negative control `none` and the
 * classic mistakes, which stay as naive as the recipes they teach (and, re-entering
 * its lock to record the order, of `reentrant`: ReentrantPurchases). An
 * unlocked read answers the final refusals; then the lock, and under it the
 * read-check-write of one order.
 */
@Injectable()
export class PerBuyerPurchases extends LockedPurchases {
  private readonly soldOut = new SoldOutSignals();

  constructor(
    lock: Lock,
    keys: KeyLayout,
    @Inject(REDIS_CLIENT) protected readonly redis: RedisClient,
    protected readonly faults: FaultStop,
    @Inject(PURCHASE_CONFIG.token) config: PurchaseConfig,
  ) {
    super(lock, keys, strategyFamily(config.lockStrategy));
    this.clock = saleClock(config);
  }

  private readonly clock: ((redisNow: number) => number) | undefined;

  async purchase(order: OrderRequest): Promise<Order> {
    const k = this.keys.product(order.productId);
    // Unlocked pre-check, for refusals only: a sold-out read here is true when read (stock
    // rises again only by a cancel or an expiry), and the sold-out tail never queues for the lock.
    // A "yes" proves nothing yet; it is checked again under the lock.
    const { saleId } = await this.check(k, order, false);
    return this.lock.using(k.lock, (hold) => this.buy(k, order, hold), {
      signal: this.soldOut.signal(order.productId, saleId),
    });
  }

  /** The critical section: read, check, write. Correct only while the lock excludes other buyers. */
  private async buy(k: ProductKeys, order: OrderRequest, hold: Hold): Promise<Order> {
    const { stock, saleId } = await this.check(k, order, true);
    return this.record(k, order, hold, stock - order.quantity, saleId);
  }

  /**
   * Writes the order the rules allowed, under `hold`; `expected` is the stock the
   * holder's read leaves after it, `saleId` the sale that read saw.
   */
  protected async record(
    k: ProductKeys,
    order: OrderRequest,
    hold: Hold,
    expected: number,
    saleId: string,
  ): Promise<Order> {
    // The hold may have outlived its TTL while we read (a slow Redis, a GC pause):
    // then another buyer may hold the lock, and writing now could oversell.
    hold.assertValid();
    this.faults.reached('before-write');
    const orderId = newOrderId(order.productId);
    const [remaining] = await writeOrders(
      this.redis,
      k,
      this.family,
      [{ order, orderId, remaining: expected }],
      hold.fence,
      this.clock,
    );
    if (typeof remaining === 'string') throw skippedError(remaining);
    if (remaining <= 0) this.soldOut.soldOut(order.productId, saleId);
    return acknowledge(order, orderId, remaining);
  }

  /**
   * Throws the refusal that applies now, if any; else returns the stock read and the
   * sale it was read in. Under the lock (`locked`), a keyed order's Idempotency-Key
   * claim is read too: one no longer this request's (it lapsed while this hold waited
   * or stalled, and a retry took it over) means another request decides that key, and
   * the MULTI this path writes with could not tell, so the order is not written
   * (IDEMPOTENCY_KEY_IN_USE), as the batched path and the write scripts do.
   */
  private async check(
    k: ProductKeys,
    order: OrderRequest,
    locked: boolean,
  ): Promise<{ stock: number; saleId: string }> {
    const claim = locked ? order.claim : undefined;
    const read = await readSale(this.redis, k, this.family, [order.userId], claim ? [claim.key] : [], this.clock);
    if (claim && !stillClaimed(read.claims[0], claim)) throw new IdempotencyKeyInUseError(0);
    const no = refusal(order, buyerState(read, 0));
    if (!no) return read.sale!;
    this.soldOut.notice(order.productId, read.sale?.saleId ?? '', no);
    throw no;
  }
}
