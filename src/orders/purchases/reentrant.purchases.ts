import { Inject, Injectable } from '@nestjs/common';
import type { RedisClient } from '../../redis/create-client';
import { Hold, Lock } from '../../locks/lock';
import { KeyLayout, ProductKeys } from '../../redis/key-layout';
import { REDIS_CLIENT } from '../../redis/redis.constants';
import { PURCHASE_CONFIG, PurchaseConfig } from '../orders.config';
import { FaultStop } from '../fault-stop';
import type { Order, OrderRequest } from '../order';
import { PerBuyerPurchases } from './per-buyer.purchases';

/**
 * One buyer per hold under `reentrant`, where recording the order takes the product's
 * lock again while the purchase already holds it, as code that calls other locked
 * code does: the lock is re-entered (its hold count goes 1, 2, 1) instead of waiting
 * for itself forever. Only a reentrant lock can be given this path.
 */
@Injectable()
export class ReentrantPurchases extends PerBuyerPurchases {
  constructor(
    lock: Lock,
    keys: KeyLayout,
    @Inject(REDIS_CLIENT) redis: RedisClient,
    faults: FaultStop,
    @Inject(PURCHASE_CONFIG.token) config: PurchaseConfig,
  ) {
    super(lock, keys, redis, faults, config);
  }

  /** The inner hold is the outer one, re-entered: the same validity, refused if it was lost. */
  protected override record(
    k: ProductKeys,
    order: OrderRequest,
    _outer: Hold,
    expected: number,
    saleId: string,
  ): Promise<Order> {
    return this.lock.using(k.lock, (inner) => super.record(k, order, inner, expected, saleId));
  }
}
