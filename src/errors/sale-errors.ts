/** The sale's rules and an order's outcome: final answers (see errors.ts). */
import { createError, example, retryAfterSeconds } from './app-error';

// ---------------------------------------------------------------- the sale's rules (final answers)

/** Before the sale's start by Redis's clock: `startsAt` in the body, Retry-After the seconds to it. */
export class SaleNotStartedError extends createError(
  'SALE_NOT_STARTED',
  409,
  (productId: string, startsAtMs: number, nowMs: number) =>
    `the sale of "${productId}" starts at ${new Date(startsAtMs).toISOString()}, in ${retryAfterSeconds(startsAtMs - nowMs)} s`,
) {
  readonly startsAt: string;
  override readonly retryAfterS: number;

  constructor(
    productId: string,
    readonly startsAtMs: number,
    /** Redis's clock when the refusal was decided. */
    readonly nowMs: number,
  ) {
    super(productId, startsAtMs, nowMs);
    this.startsAt = new Date(startsAtMs).toISOString();
    this.retryAfterS = retryAfterSeconds(startsAtMs - nowMs);
  }
}
example(SaleNotStartedError, 'phone', Date.UTC(2026, 10, 27, 10, 0, 0), Date.UTC(2026, 10, 27, 9, 59, 48));

/** At or after the sale's end by Redis's clock. */
export class SaleEndedError extends createError(
  'SALE_ENDED',
  409,
  (productId: string, endsAtMs: number) => `the sale of "${productId}" ended at ${new Date(endsAtMs).toISOString()}`,
) {}
example(SaleEndedError, 'phone', Date.UTC(2026, 10, 27, 11, 0, 0));

/** A product with a waiting room sells only to a buyer the queue admitted. */
export class AdmissionRequiredError extends createError(
  'ADMISSION_REQUIRED',
  403,
  (productId: string) =>
    `product "${productId}" sells through its waiting room: join it (POST /api/products/${productId}/queue), wait for your pass, and send it as the Admission-Pass header`,
) {}
example(AdmissionRequiredError, 'phone');

/** A pass that is not one this product issued to this user, or no longer valid. */
export class AdmissionInvalidError extends createError(
  'ADMISSION_INVALID',
  403,
  (why: string) => `this Admission-Pass ${why}; read your ticket (GET /api/products/:id/queue/:ticket) for its state`,
) {}
example(AdmissionInvalidError, 'has expired');

/** Joining the queue of a product that has none. */
export class NoQueueError extends createError(
  'NO_QUEUE',
  409,
  (productId: string) => `product "${productId}" has no waiting room: buy directly (POST /api/orders)`,
) {}
example(NoQueueError, 'phone');

export class UnknownTicketError extends createError(
  'UNKNOWN_TICKET',
  404,
  (productId: string) => `no such ticket in the waiting room of product "${productId}" (a new sale starts a new queue)`,
) {}
example(UnknownTicketError, 'phone');

export class UnknownProductError extends createError(
  'UNKNOWN_PRODUCT',
  404,
  (productId: string) => `product "${productId}" has no sale; an admin starts one with PUT /api/products/${productId}`,
) {}
example(UnknownProductError, 'phone');

export class SoldOutError extends createError(
  'SOLD_OUT',
  409,
  (productId: string) => `product "${productId}" is sold out`,
) {}
example(SoldOutError, 'phone');

export class InsufficientStockError extends createError(
  'INSUFFICIENT_STOCK',
  409,
  (productId: string, remaining: number, requested: number) =>
    `product "${productId}" has ${remaining} left, fewer than the ${requested} asked for`,
) {}
example(InsufficientStockError, 'phone', 1, 2);

export class LimitReachedError extends createError(
  'LIMIT_REACHED',
  409,
  (userId: string, perUserLimit: number, bought: number, requested: number) =>
    `user "${userId}" may buy at most ${perUserLimit} of this product and has ${bought}; ${requested} more would exceed the limit`,
) {}
example(LimitReachedError, 'user1', 1, 1, 1);

// ---------------------------------------------------------------- an order's outcome (pay, cancel, expiry)

export class UnknownOrderError extends createError(
  'UNKNOWN_ORDER',
  404,
  (orderId: string) => `order "${orderId}" is not known (not placed, or its sale was restarted since)`,
) {}
example(UnknownOrderError, 'phone.0b7a3c5e-7d1f-4f7e-9a51-0c8d2e4b6f10');

/** A payment or a cancel of an order that another payment already paid. */
export class OrderPaidError extends createError(
  'ORDER_PAID',
  409,
  (orderId: string, paidBy: string) =>
    `order "${orderId}" was already paid by payment "${paidBy}"; any other payment for it is to be refunded`,
) {}
example(OrderPaidError, 'phone.0b7a3c5e-7d1f-4f7e-9a51-0c8d2e4b6f10', 'pay-4471');

export class OrderCancelledError extends createError(
  'ORDER_CANCELLED',
  409,
  (orderId: string) =>
    `order "${orderId}" was cancelled and its units went back to stock; a payment for it is to be refunded`,
) {}
example(OrderCancelledError, 'phone.0b7a3c5e-7d1f-4f7e-9a51-0c8d2e4b6f10');

/** The payment deadline passed first (by Redis's clock): the units went back to stock. */
export class OrderExpiredError extends createError(
  'ORDER_EXPIRED',
  409,
  (orderId: string) =>
    `order "${orderId}" expired: its payment deadline passed and its units went back to stock; a payment for it is to be refunded`,
) {}
example(OrderExpiredError, 'phone.0b7a3c5e-7d1f-4f7e-9a51-0c8d2e4b6f10');
