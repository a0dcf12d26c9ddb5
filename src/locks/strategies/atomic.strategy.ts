import type { Redis } from 'ioredis';
import {
  InsufficientStockError,
  LimitReachedError,
  SoldOutError,
  UnknownProductError,
} from '../../errors/domain-errors';
import type { OrderRequest } from '../../orders/sale-rules';
import type { ProductKeys } from '../../redis/key-layout';
import { LockFreeStrategy } from '../lock-strategy';

/**
 * `atomic` — no lock: the check and the write are one Lua script
 * (src/redis/scripts/purchase.lua). Redis executes a script with nothing else
 * interleaved, so there is no window between reading the stock and decrementing
 * it, and one round trip per purchase.
 *
 * Where it comes from: the seed articles' "Lua for atomicity" (EVAL since Redis
 * 2.6); it is the baseline every lock is measured against.
 * What can go wrong: nothing that oversells. The cost is that all logic must live
 * in Lua, a long script blocks every other client, and keys must be known up front
 * (they are: one product's keys share a hash tag, so it also runs on a cluster).
 */
export class AtomicStrategy implements LockFreeStrategy {
  readonly kind = 'lock-free';
  readonly name = 'atomic';
  readonly unsafe = false;
  readonly reentrant = false;
  readonly lostLocks = 0;

  constructor(private readonly redis: Pick<Redis, 'purchase'>) {}

  async purchase(k: ProductKeys, order: OrderRequest, orderId: string): Promise<number> {
    const [status, a, b] = await this.redis.purchase(
      k.meta,
      k.stock,
      k.buyers,
      k.orders,
      order.userId,
      order.quantity,
      orderId,
    );
    switch (status) {
      case 'OK':
        return a;
      case 'UNKNOWN_PRODUCT':
        throw new UnknownProductError(order.productId);
      case 'LIMIT_REACHED':
        throw new LimitReachedError(order.userId, a, b, order.quantity);
      case 'SOLD_OUT':
        throw new SoldOutError(order.productId);
      case 'INSUFFICIENT_STOCK':
        throw new InsufficientStockError(order.productId, a, order.quantity);
      default:
        throw new Error(`purchase.lua replied ${String(status)}`);
    }
  }
}
