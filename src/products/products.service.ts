import { Inject, Injectable } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { UnknownProductError } from '../errors/domain-errors';
import { LOCK_STRATEGY, PurchaseStrategy } from '../locks/lock-strategy';
import { execAll } from '../redis/exec-all';
import { KeyLayout } from '../redis/key-layout';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { Product } from './product';

@Injectable()
export class ProductsService {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: Redis,
    @Inject(LOCK_STRATEGY) private readonly strategy: PurchaseStrategy,
    private readonly keys: KeyLayout,
  ) {}

  /**
   * Starts or restarts a sale: stock, limit, and empty buyers and order log, in one
   * script. Under a lock strategy it runs holding the product's lock, so that a
   * purchase already between its read and its write finishes first and cannot apply
   * to the new sale; releasing the lock afterwards clears it. A lock-free purchase
   * is atomic on its own, so the script alone is enough.
   */
  async startSale(productId: string, stock: number, perUserLimit: number): Promise<Product> {
    const k = this.keys.product(productId);
    const reset = () => this.redis.resetSale(k.meta, k.stock, k.buyers, k.orders, stock, perUserLimit);
    await (this.strategy.kind === 'lock' ? this.strategy.withLock(k.lock, reset) : reset());
    return this.get(productId);
  }

  async get(productId: string): Promise<Product> {
    const k = this.keys.product(productId);
    const [meta, stock, orders] = (await execAll(
      this.redis.multi().hmget(k.meta, 'initialStock', 'perUserLimit').get(k.stock).xlen(k.orders),
    )) as [(string | null)[], string | null, number];
    const [initialStock, perUserLimit] = meta;
    if (initialStock === null || perUserLimit === null || stock === null) throw new UnknownProductError(productId);
    return {
      id: productId,
      initialStock: Number(initialStock),
      stock: Number(stock),
      sold: Number(initialStock) - Number(stock),
      orders,
      perUserLimit: Number(perUserLimit),
    };
  }
}
