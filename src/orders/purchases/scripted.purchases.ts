import { Inject, Injectable } from '@nestjs/common';
import type { RedisClient } from '../../redis/create-client';
import {
  AdmissionRequiredError,
  BucketsBusyError,
  AppError,
  InsufficientStockError,
  LimitReachedError,
  SaleEndedError,
  SaleNotStartedError,
  SoldOutError,
  StrategyMismatchError,
  UnknownProductError,
} from '../../errors/errors';
import { saleClock } from '../../settings/lessons.config';
import { strategyFamily } from '../../settings/strategy.config';
import { PURCHASE_CONFIG, PurchaseConfig } from '../orders.config';
import { KeyLayout } from '../../redis/key-layout';
import { purchase, purchaseKeys } from '../../redis/lua-scripts';
import { REDIS_CLIENT } from '../../redis/redis.constants';
import { acknowledge, newOrderId, Order, OrderRequest, OUTCOME_TTL_MS } from '../order';
import { orderWrite, skippedError } from '../sale-store';
import { PurchasePath, PurchaseStatus } from './purchase-path';

/**
 * `atomic` — no lock: the check and the write are one Lua script
 * (src/redis/scripts/purchase-7.lua). Redis executes a script with nothing else
 * interleaved, so there is no window between reading the stock and decrementing
 * it, and one round trip per purchase.
 *
 * Where it comes from: the seed articles' "Lua for atomicity" (EVAL since Redis
 * 2.6); it is the baseline every lock is measured against.
 * What can go wrong: nothing that oversells. The cost is that all logic must live
 * in Lua, a long script blocks every other client, and keys must be known up front
 * (they are: one product's keys share a hash tag, so it also runs on a cluster).
 */
@Injectable()
export class ScriptedPurchases extends PurchasePath {
  /** strategyFamily() of LOCK_STRATEGY: a sale started by another family is refused. */
  private readonly family: string;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
    @Inject(PURCHASE_CONFIG.token) config: PurchaseConfig,
  ) {
    super();
    this.family = strategyFamily(config.lockStrategy);
    this.clock = saleClock(config);
  }

  /** SALE_CLOCK=app: the naive window check, by this process's clock (saleClock()). */
  private readonly clock: ((redisNow: number) => number) | undefined;

  async purchase(order: OrderRequest): Promise<Order> {
    const k = this.keys.product(order.productId);
    const orderId = newOrderId(order.productId);
    const [status, a, b] = await orderWrite(
      purchase.run(
        this.redis,
        purchaseKeys(k),
        order.userId,
        order.quantity,
        orderId,
        order.claim?.key ?? '',
        order.claim?.claimId ?? '',
        OUTCOME_TTL_MS,
        this.family,
        this.clock ? this.clock(0) : '',
        order.passExpiresAt ?? '',
        k.marksGuess,
        ...(order.bucketList === undefined ? [] : [order.bucketList]),
      ),
    );
    if (status === 'OK') return acknowledge(order, orderId, Number(a));
    if (status === 'STRATEGY_MISMATCH') throw new StrategyMismatchError(order.productId, String(a), this.family);
    throw refusalOf(order, status, Number(a), Number(b));
  }

  /** Each purchase is one script, so a reset (one script too) can never fall inside one. */
  exclusive<T>(_productId: string, fn: (fence?: number) => Promise<T>): Promise<T> {
    return fn();
  }

  status(): Promise<PurchaseStatus> {
    return Promise.resolve({ lostLocks: 0 });
  }
}

/** purchase-7.lua's refusal replies, as the errors sale-rules.ts gives for the same state. */
function refusalOf(order: OrderRequest, status: string, a: number, b: number): AppError | Error {
  switch (status) {
    case 'UNKNOWN_PRODUCT':
      return new UnknownProductError(order.productId);
    case 'BUCKETS_CHANGED':
      return new BucketsBusyError(1, 'changed');
    case 'LIMIT_REACHED':
      return new LimitReachedError(order.userId, a, b, order.quantity);
    case 'CLAIM_LOST':
    case 'PASS_EXPIRED':
      return skippedError(status);
    case 'SALE_NOT_STARTED':
      return new SaleNotStartedError(order.productId, a, b);
    case 'SALE_ENDED':
      return new SaleEndedError(order.productId, a);
    case 'ADMISSION_REQUIRED':
      return new AdmissionRequiredError(order.productId);
    case 'SOLD_OUT':
      return new SoldOutError(order.productId);
    case 'INSUFFICIENT_STOCK':
      return new InsufficientStockError(order.productId, a, order.quantity);
    default:
      return new Error(`purchase-7.lua replied ${status}`);
  }
}
