import type { ChainableCommander, Redis } from 'ioredis';
import {
  InsufficientStockError,
  LimitReachedError,
  SoldOutError,
  StaleLockError,
  UnknownProductError,
} from '../errors/domain-errors';
import { execAll } from '../redis/exec-all';
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

/** An order the rules accepted, with the id it will be acknowledged under. */
export interface AcceptedOrder {
  readonly order: OrderRequest;
  readonly orderId: string;
}

/**
 * Writes accepted orders in one round trip and returns the stock left after each.
 * Under a plain hold: one MULTI of queueOrder's commands. Under a fenced hold
 * (`fence` given): fenced-write.lua, which applies them only if no later lock was
 * issued, else throws StaleLockError with nothing written.
 */
export async function writeOrders(
  redis: Pick<Redis, 'multi' | 'fencedWrite'>,
  k: ProductKeys,
  accepted: readonly AcceptedOrder[],
  fence?: number,
): Promise<number[]> {
  if (fence === undefined) {
    const multi = redis.multi();
    for (const { order, orderId } of accepted) queueOrder(multi, k, order, orderId);
    const replies = await execAll(multi);
    // queueOrder puts three commands per order; the first, DECRBY, says what was left.
    return accepted.map((_, i) => Number(replies[i * 3]));
  }
  const args = accepted.flatMap(({ order, orderId }) => [order.userId, order.quantity, orderId]);
  const [status, ...rest] = await redis.fencedWrite(k.fence, k.stock, k.buyers, k.orders, k.meta, fence, ...args);
  if (status === 'STALE_LOCK') throw new StaleLockError(fence, rest[0]);
  // The holder checked the stock under this very hold: a shortfall means someone
  // wrote outside the lock.
  if (status !== 'OK') throw new Error(`fenced write refused: ${status} ${rest.join(' ')}; nothing was written`);
  return rest.map(Number);
}
