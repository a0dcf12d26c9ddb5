import { randomUUID } from 'node:crypto';

/** What is bought: the fields a purchase and its acknowledgement share. */
export interface OrderLine {
  readonly productId: string;
  readonly userId: string;
  readonly quantity: number;
  /**
   * The bucket list that chose `productId`, the buyer's home bucket (src/orders/escrow.ts):
   * the list part of its sale's epoch (listOf(), src/sale/buckets.ts; '' for one bucket).
   * The rules refuse the purchase (BUCKETS_BUSY, `changed`) when the bucket is of another
   * list now, a DELETE and a PUT having run since the list was read; a restart, which
   * keeps the buckets, does not. Absent: not checked.
   */
  readonly bucketList?: string;
}

/**
 * A request's claim on its Idempotency-Key (idempotency-claim-3.lua): the write places
 * the order, and records its outcome under the key, only while the claim is still this
 * request's.
 */
export interface Claim {
  readonly key: string;
  readonly claimId: string;
  /** Of the request's body: the same key with another body is refused. */
  readonly fingerprint: string;
}

/** What a purchase asks for; CreateOrderDto is the validated HTTP form of it. */
export interface OrderRequest extends OrderLine {
  /** Present when the request carries an Idempotency-Key. */
  readonly claim?: Claim;
  /** Made with an Admission-Pass: when it lapses (ms, Redis's clock); the write refuses it after. */
  readonly passExpiresAt?: number;
}

/** What becomes of an order: reserved until it is paid, cancelled or expires (order-outcome-6.lua). */
export const ORDER_STATUSES = ['reserved', 'paid', 'cancelled', 'expired'] as const;
export type OrderStatusName = (typeof ORDER_STATUSES)[number];

/** A purchase as POST /api/orders acknowledges it (201). */
export interface Order extends OrderLine {
  /** Also a field of the order's entry in the product's order stream. */
  readonly orderId: string;
  /** Units left right after this order. */
  readonly remaining: number;
  /**
   * The order's status as the answer is written: `reserved` for an order written now; a
   * replay (the same Idempotency-Key or pass again) says what became of it since.
   */
  readonly status: OrderStatusName;
}

/** The acknowledgement of a written order: the request's line, never its claim; reserved until paid. */
export function acknowledge(order: OrderLine, orderId: string, remaining: number): Order {
  return {
    orderId,
    productId: order.productId,
    userId: order.userId,
    quantity: order.quantity,
    remaining,
    status: 'reserved',
  };
}

/** How long an Idempotency-Key's outcome is kept after the product's last keyed request: a day. */
export const OUTCOME_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * A new order's id: `<productId>.<uuid>`. The product comes first so that a payment or a
 * cancel, which names only the order, finds the product's keys (one hash slot on a
 * cluster) without an index that would live on another shard. Product ids have no dot
 * (ID_PATTERN).
 */
export function newOrderId(productId: string): string {
  return `${productId}.${randomUUID()}`;
}

/**
 * What an order id looks like (newOrderId); before the dot, the product id, or the id of
 * the bucket that sold it (`<product id>~<n>`, src/sale/buckets.ts), whose keys hold it.
 */
export const ORDER_ID_PATTERN =
  /^([A-Za-z0-9_-]{1,64}(?:~[1-9][0-9]{0,3})?)\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The product (or bucket: its keys) an order id names, or null when it is not one of ours. */
export function productOfOrder(orderId: string): string | null {
  return ORDER_ID_PATTERN.exec(orderId)?.[1] ?? null;
}
