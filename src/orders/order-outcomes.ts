import { Inject, Injectable } from '@nestjs/common';
import {
  OrderCancelledError,
  OrderExpiredError,
  OrderPaidError,
  OutcomeUnknownError,
  UnknownOrderError,
} from '../errors/errors';
import type { RedisClient } from '../redis/create-client';
import { KeyLayout, type ProductKeys } from '../redis/key-layout';
import { orderOutcome, orderOutcomeKeys } from '../redis/lua-scripts';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { isOutcomeUnknown } from '../redis/redis-errors';
import { productOfBucket } from '../sale/buckets';
import { OrderStatusName, productOfOrder } from './order';

const STATUS_OF = { R: 'reserved', P: 'paid', C: 'cancelled', E: 'expired' } as const;

/** An order as GET, pay and cancel answer it. */
export interface OrderState {
  readonly orderId: string;
  readonly productId: string;
  readonly userId: string;
  readonly quantity: number;
  readonly status: OrderStatusName;
  /** The payment that paid it; null unless paid. */
  readonly paymentId: string | null;
  /** While reserved: when it expires unless paid (ISO 8601, Redis's clock); else null. */
  readonly payBy: string | null;
}

/**
 * What becomes of a reservation (a 201): paid, cancelled by the buyer, or expired at
 * its payment deadline, each decided by order-outcome-6.lua in one atomic step with
 * the return of its units to stock, so exactly one of them wins and a unit comes back
 * at most once. Nothing here keeps state: any instance answers for any order.
 */
@Injectable()
export class OrderOutcomes {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
  ) {}

  /**
   * The order as Redis has it. With BUYER_AUTH, `buyer` is the token's `sub`: another
   * buyer's order is no order of theirs (404, as an order that does not exist).
   */
  async get(orderId: string, buyer: string | null = null): Promise<OrderState> {
    const order = await this.run(orderId, 'read', '');
    if (buyer !== null && order.userId !== buyer) throw new UnknownOrderError(orderId);
    return order;
  }

  /**
   * Pays a reservation. The same paymentId again answers the paid order (a provider's
   * retried callback); any refusal names what the caller must refund.
   */
  async pay(orderId: string, paymentId: string): Promise<OrderState> {
    const order = await this.run(orderId, 'pay', paymentId);
    if (order.status === 'paid' && order.paymentId === paymentId) return order;
    throw this.refusal(order);
  }

  /**
   * Cancels a reservation (its units go back); a cancelled order cancelled again answers
   * the same. With BUYER_AUTH only its own buyer may (an order's buyer never changes, so
   * reading it first decides that for the cancel that follows).
   */
  async cancel(orderId: string, buyer: string | null = null): Promise<OrderState> {
    if (buyer !== null) await this.get(orderId, buyer);
    const order = await this.run(orderId, 'cancel', '');
    if (order.status === 'cancelled') return order;
    throw this.refusal(order);
  }

  /**
   * Cancels a reservation if it still is one (else changes nothing): true if this call
   * cancelled it. For an admin's close of a sale (ProductsService.closeSale).
   */
  async release(orderId: string): Promise<boolean> {
    const productId = productOfOrder(orderId);
    if (productId === null) throw new UnknownOrderError(orderId);
    const k = this.keys.product(productId);
    const reply = await orderOutcome.run(this.redis, orderOutcomeKeys(k), orderId, 'cancel', '', k.marksGuess);
    return reply[0] === 'C' && reply[5] === 1;
  }

  /**
   * Expires one reservation if its deadline has passed by Redis's clock (else changes
   * nothing). For the sweeper: `expired` if this call expired it; `reserved` while it is
   * still a reservation (not yet due by its own node's clock); `gone` when it is no
   * reservation any more (paid, cancelled, expired by another, or unknown), so a
   * deadline of it left in a shard's index is stale.
   */
  async expire(k: ProductKeys, orderId: string): Promise<'expired' | 'reserved' | 'gone'> {
    const reply = await orderOutcome.run(this.redis, orderOutcomeKeys(k), orderId, 'expire', '', k.marksGuess);
    if (reply[0] === 'E' && reply[5] === 1) return 'expired';
    return reply[0] === 'R' ? 'reserved' : 'gone';
  }

  private refusal(order: OrderState): Error {
    switch (order.status) {
      case 'paid':
        return new OrderPaidError(order.orderId, order.paymentId ?? '');
      case 'cancelled':
        return new OrderCancelledError(order.orderId);
      case 'expired':
        return new OrderExpiredError(order.orderId);
      default:
        return new Error(`order ${order.orderId} is still reserved after a pay or cancel`);
    }
  }

  private async run(orderId: string, action: 'pay' | 'cancel' | 'read', paymentId: string): Promise<OrderState> {
    const productId = productOfOrder(orderId);
    if (productId === null) throw new UnknownOrderError(orderId);
    const k = this.keys.product(productId);
    let reply;
    try {
      reply = await orderOutcome.run(this.redis, orderOutcomeKeys(k), orderId, action, paymentId, k.marksGuess);
    } catch (err) {
      // A pay or cancel sent without a reply may have been applied: the same call again
      // (both are idempotent) tells.
      if (action !== 'read' && isOutcomeUnknown(err)) throw new OutcomeUnknownError();
      throw err;
    }
    if (reply[0] === 'UNKNOWN_ORDER') throw new UnknownOrderError(orderId);
    const [status, userId, quantity, paidBy, deadline] = reply;
    return {
      orderId,
      // A bucket's order is its product's (src/sale/buckets.ts): the answer names the product.
      productId: productOfBucket(productId),
      userId,
      quantity: Number(quantity),
      status: STATUS_OF[status],
      paymentId: status === 'P' ? paidBy : null,
      payBy: status === 'R' && deadline !== '' ? new Date(Number(deadline)).toISOString() : null,
    };
  }
}
