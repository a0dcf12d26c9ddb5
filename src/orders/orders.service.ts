import { Inject, Injectable } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import {
  InsufficientStockError,
  LimitReachedError,
  SoldOutError,
  UnknownProductError,
} from '../errors/domain-errors';
import { LOCK_STRATEGY, LockStrategy } from '../locks/lock-strategy';
import { execAll } from '../redis/exec-all';
import { KeyLayout, ProductKeys } from '../redis/key-layout';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { CreateOrderDto } from './dto/create-order.dto';
import { Order } from './order';

type SaleState = [perUserLimit: string | null, stock: string | null, bought: string | null];

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

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: Redis,
    @Inject(LOCK_STRATEGY) private readonly lock: LockStrategy,
    private readonly keys: KeyLayout,
  ) {}

  async purchase(order: CreateOrderDto): Promise<Order> {
    const k = this.keys.product(order.productId);
    // Unlocked pre-check, for refusals only: stock never rises during a sale, so a
    // sold-out read here is final and the sold-out tail never queues for the lock.
    // A "yes" proves nothing yet; it is checked again under the lock.
    this.check(order, await this.readState(k, order.userId));
    return this.lock.withLock(k.lock, (signal) => this.buy(k, order, signal), {
      signal: this.soldOutSignal(order.productId),
    });
  }

  /** The critical section: read, check, write. Correct only while the lock excludes other buyers. */
  private async buy(k: ProductKeys, order: CreateOrderDto, signal: AbortSignal): Promise<Order> {
    this.check(order, await this.readState(k, order.userId));
    // The hold may have outlived its TTL while we read (a slow Redis, a GC pause):
    // then another buyer may hold the lock, and writing now could oversell.
    signal.throwIfAborted();
    const orderId = randomUUID();
    const [left] = await execAll(
      this.redis
        .multi()
        .decrby(k.stock, order.quantity)
        .hincrby(k.buyers, order.userId, order.quantity)
        .xadd(k.orders, '*', 'orderId', orderId, 'userId', order.userId, 'quantity', String(order.quantity)),
    );
    if (Number(left) <= 0) this.markSoldOut(order.productId);
    return { orderId, productId: order.productId, userId: order.userId, quantity: order.quantity, remaining: Number(left) };
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

  private async readState(k: ProductKeys, userId: string): Promise<SaleState> {
    return (await execAll(
      this.redis.pipeline().hget(k.meta, 'perUserLimit').get(k.stock).hget(k.buyers, userId),
    )) as SaleState;
  }

  /** Throws the refusal that applies, if any; the limit is checked first. */
  private check({ productId, userId, quantity }: CreateOrderDto, [limit, stock, bought]: SaleState): void {
    if (limit === null || stock === null) throw new UnknownProductError(productId);
    const already = Number(bought ?? 0);
    if (already + quantity > Number(limit)) throw new LimitReachedError(userId, Number(limit), already, quantity);
    const left = Number(stock);
    if (left <= 0) {
      this.markSoldOut(productId);
      throw new SoldOutError(productId);
    }
    if (left < quantity) throw new InsufficientStockError(productId, left, quantity);
  }
}
