import type { ChainableCommander, Redis } from 'ioredis';
import {
  InsufficientStockError,
  LimitReachedError,
  SoldOutError,
  UnknownProductError,
} from '../errors/domain-errors';
import type { ProductKeys } from '../redis/key-layout';

/** What a purchase asks for; CreateOrderDto is the validated HTTP form of it. */
export interface OrderRequest {
  readonly productId: string;
  readonly userId: string;
  readonly quantity: number;
}

/** The product's limit, its stock, and what this buyer already has, as Redis returned them. */
export type SaleState = [perUserLimit: string | null, stock: string | null, bought: string | null];

/**
 * The three reads every check needs, sent together (one round trip). On an
 * auto-pipelining client they also share a socket write with every other buyer's
 * reads of the same tick.
 */
export function readSaleState(redis: Pick<Redis, 'hget' | 'get'>, k: ProductKeys, userId: string): Promise<SaleState> {
  return Promise.all([redis.hget(k.meta, 'perUserLimit'), redis.get(k.stock), redis.hget(k.buyers, userId)]);
}

/**
 * The rules of a sale, in the order a buyer is told about them: unknown product,
 * then the per-user limit (so a repeat buyer hears LIMIT_REACHED even after the
 * sale sold out), then stock. Throws the refusal that applies.
 */
export function checkPurchase({ productId, userId, quantity }: OrderRequest, [limit, stock, bought]: SaleState): void {
  if (limit === null || stock === null) throw new UnknownProductError(productId);
  const already = Number(bought ?? 0);
  if (already + quantity > Number(limit)) throw new LimitReachedError(userId, Number(limit), already, quantity);
  const left = Number(stock);
  if (left <= 0) throw new SoldOutError(productId);
  if (left < quantity) throw new InsufficientStockError(productId, left, quantity);
}

/**
 * Queues the writes of one order on a MULTI: take the units from stock, add them to
 * the buyer's count, append the order to the stream. The DECRBY reply (the stock
 * left) comes first in the EXEC replies.
 */
export function queueOrder(multi: ChainableCommander, k: ProductKeys, order: OrderRequest, orderId: string): ChainableCommander {
  return multi
    .decrby(k.stock, order.quantity)
    .hincrby(k.buyers, order.userId, order.quantity)
    .xadd(k.orders, '*', 'orderId', orderId, 'userId', order.userId, 'quantity', String(order.quantity));
}
