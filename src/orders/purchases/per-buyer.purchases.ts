import { Inject, Injectable } from '@nestjs/common';
import type { RedisClient } from '../../redis/create-client';
import { randomUUID } from 'node:crypto';
import { Hold, Lock } from '../../locks/lock';
import { KeyLayout, ProductKeys } from '../../redis/key-layout';
import { REDIS_CLIENT } from '../../redis/redis.constants';
import { AppConfig, strategyFamily } from '../../config/app-config';
import { APP_CONFIG } from '../../config/config.constants';
import { FaultStop } from '../fault-stop';
import { IdempotencyKeyInUseError } from '../../errors/errors';
import { acknowledge, Order, OrderRequest } from '../order';
import { refusal } from '../sale-rules';
import { buyerState, readSale, writeOrders } from '../sale-store';
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
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    super(lock, keys, strategyFamily(config.lockStrategy));
  }

  async purchase(order: OrderRequest): Promise<Order> {
    const k = this.keys.product(order.productId);
    // Unlocked pre-check, for refusals only: stock never rises during a sale, so a
    // sold-out read here is final and the sold-out tail never queues for the lock.
    // A "yes" proves nothing yet; it is checked again under the lock.
    await this.check(k, order);
    return this.lock.using(k.lock, (hold) => this.buy(k, order, hold), {
      signal: this.soldOut.signal(order.productId),
    });
  }

  /** The critical section: read, check, write. Correct only while the lock excludes other buyers. */
  private async buy(k: ProductKeys, order: OrderRequest, hold: Hold): Promise<Order> {
    const stock = await this.check(k, order);
    return this.record(k, order, hold, stock - order.quantity);
  }

  /** Writes the order the rules allowed, under `hold`; `expected` is the stock the holder's read leaves after it. */
  protected async record(k: ProductKeys, order: OrderRequest, hold: Hold, expected: number): Promise<Order> {
    // The hold may have outlived its TTL while we read (a slow Redis, a GC pause):
    // then another buyer may hold the lock, and writing now could oversell.
    hold.assertValid();
    this.faults.reached('before-write');
    const orderId = randomUUID();
    const [remaining] = await writeOrders(
      this.redis,
      k,
      this.family,
      [{ order, orderId, remaining: expected }],
      hold.fence,
    );
    if (remaining === null) throw new IdempotencyKeyInUseError(0);
    if (remaining <= 0) this.soldOut.soldOut(order.productId);
    return acknowledge(order, orderId, remaining);
  }

  /** Throws the refusal that applies now, if any; else returns the stock read. */
  private async check(k: ProductKeys, order: OrderRequest): Promise<number> {
    const read = await readSale(this.redis, k, this.family, [order.userId]);
    const no = refusal(order, buyerState(read, 0));
    if (!no) return read.sale!.stock;
    this.soldOut.notice(order.productId, no);
    throw no;
  }
}
