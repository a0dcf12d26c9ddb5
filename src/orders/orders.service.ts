import { Inject, Injectable } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { SoldOutError } from '../errors/domain-errors';
import { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.constants';
import { LOCK_STRATEGY, LockStrategy, PurchaseStrategy } from '../locks/lock-strategy';
import { KeyLayout, ProductKeys } from '../redis/key-layout';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { Order } from './order';
import { OrderBatches } from './order-batches';
import { checkPurchase, OrderRequest, readSaleState, writeOrders } from './sale-rules';

@Injectable()
export class OrdersService {
  /**
   * Per product, a signal that fires when this process sees its stock at 0. Buyers
   * waiting for the lock listen to it, so once one of them finds the product sold
   * out, the rest answer SOLD_OUT at once instead of each taking the lock to learn
   * it. Stock only falls during a sale, so a 0 seen after they began waiting is true
   * for them too.
   */
  private readonly soldOut = new Map<string, AbortController>();
  /** Set when the lock serves batches of buyers per hold (lock coalescing). */
  private readonly batches?: OrderBatches;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: Redis,
    @Inject(LOCK_STRATEGY) private readonly strategy: PurchaseStrategy,
    private readonly keys: KeyLayout,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    if (strategy.kind === 'lock' && strategy.coalesces) {
      this.batches = new OrderBatches(redis, strategy, keys, config.lockWaitMs);
    }
  }

  async purchase(order: OrderRequest): Promise<Order> {
    if (this.batches) return this.batches.purchase(order);
    const k = this.keys.product(order.productId);
    // Unlocked pre-check, for refusals only: stock never rises during a sale, so a
    // sold-out read here is final and the sold-out tail never queues for the lock.
    // A "yes" proves nothing yet; it is checked again under the lock.
    await this.check(k, order);
    const strategy = this.strategy;
    if (strategy.kind === 'lock-free') {
      const orderId = randomUUID();
      const left = await strategy.purchase(k, order, orderId, this.soldOutSignal(order.productId)).catch((err: unknown) => {
        if (err instanceof SoldOutError) this.markSoldOut(order.productId);
        throw err;
      });
      return this.acknowledge(order, orderId, left);
    }
    return strategy.withLock(k.lock, (signal, fence) => this.buy(strategy, k, order, signal, fence), {
      signal: this.soldOutSignal(order.productId),
    });
  }

  /** The critical section: read, check, write. Correct only while the lock excludes other buyers. */
  private async buy(lock: LockStrategy, k: ProductKeys, order: OrderRequest, signal: AbortSignal, fence?: number): Promise<Order> {
    await this.check(k, order);
    // Recording the order takes the product lock of its own, so it is safe to call
    // alone; here, under the outer hold, a reentrant lock is re-entered (its hold
    // count goes to 2 and back). A non-reentrant lock would wait for itself forever,
    // so it is not taken twice.
    const record = () => this.record(k, order, signal, fence);
    const left = lock.reentrant ? await lock.withLock(k.lock, record) : await record();
    return this.acknowledge(order, left.orderId, left.remaining);
  }

  private async record(k: ProductKeys, order: OrderRequest, signal: AbortSignal, fence?: number) {
    // The hold may have outlived its TTL while we read (a slow Redis, a GC pause):
    // then another buyer may hold the lock, and writing now could oversell.
    signal.throwIfAborted();
    const orderId = randomUUID();
    const [left] = await writeOrders(this.redis, k, [{ order, orderId }], fence);
    return { orderId, remaining: left };
  }

  private acknowledge(order: OrderRequest, orderId: string, remaining: number): Order {
    if (remaining <= 0) this.markSoldOut(order.productId);
    return { orderId, productId: order.productId, userId: order.userId, quantity: order.quantity, remaining };
  }

  /** Reads and checks the sale's rules; a sold-out answer also wakes this process's waiters. */
  private async check(k: ProductKeys, order: OrderRequest): Promise<void> {
    try {
      checkPurchase(order, await readSaleState(this.redis, k, order.userId));
    } catch (err) {
      if (err instanceof SoldOutError) this.markSoldOut(order.productId);
      throw err;
    }
  }

  private soldOutSignal(productId: string): AbortSignal {
    let controller = this.soldOut.get(productId);
    if (!controller) {
      controller = new AbortController();
      // One listener per waiting buyer is expected, not a leak.
      setMaxListeners(0, controller.signal);
      this.soldOut.set(productId, controller);
    }
    return controller.signal;
  }

  /** Wakes this process's waiters with SOLD_OUT; later buyers start from a fresh signal. */
  private markSoldOut(productId: string): void {
    const controller = this.soldOut.get(productId);
    if (!controller) return;
    this.soldOut.delete(productId);
    controller.abort(new SoldOutError(productId));
  }
}
