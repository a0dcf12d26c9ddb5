import {
  AdmissionRequiredError,
  BucketsBusyError,
  AppError,
  InsufficientStockError,
  LimitReachedError,
  SaleEndedError,
  SaleNotStartedError,
  SoldOutError,
  UnknownProductError,
} from '../errors/errors';
import type { OrderRequest } from './order';
import { listOf } from '../sale/buckets';

/** What the rules look at: the product's limit, its stock, and the units this buyer already has. */
export interface SaleState {
  readonly perUserLimit: number;
  readonly stock: number;
  readonly bought: number;
  /** The window (ms, null: unbounded) and Redis's clock at the read; absent: no window. */
  readonly startsAt?: number | null;
  readonly endsAt?: number | null;
  readonly now?: number;
  /** A waiting room: only a purchase made with a pass (its claim, passClaimKey()) may buy. */
  readonly queued?: boolean;
  /** Meta's `epoch` ('' for a product of one bucket): its list part is the list an order's bucket must be of (OrderLine.bucketList). */
  readonly epoch?: string;
}

/** The Idempotency-Key a purchase made with an Admission-Pass is claimed under: never a header's (it holds a space). */
export function passClaimKey(pass: string): string {
  return `pass ${pass}`;
}

/**
 * The rules of a sale, in the order a buyer is told about them: unknown product
 * (`state` null), a bucket chosen from another list of the product's buckets (BUCKETS_BUSY), the window (by Redis's clock), the waiting room's pass, then the per-user limit (so a repeat buyer hears LIMIT_REACHED
 * even after the sale sold out), then stock. Returns the refusal that applies, or
 * null when the order may be written.
 *
 * The one TypeScript copy of the rules: every purchase path decides with it, a batch
 * buyer by buyer against a running state. Their one Lua copy is purchase-7.lua;
 * sale-rules.spec.ts runs both on the same table of cases.
 */
export function refusal(order: OrderRequest, state: SaleState | null): AppError | null {
  if (state === null) return new UnknownProductError(order.productId);
  // Its bucket was chosen from another list of the product's buckets: checkout reads it again.
  const list = listOf(state.epoch ?? '');
  if (order.bucketList !== undefined && list !== null && order.bucketList !== list)
    return new BucketsBusyError(1, 'changed');
  const now = state.now ?? 0;
  if (state.startsAt != null && now < state.startsAt) {
    return new SaleNotStartedError(order.productId, state.startsAt, now);
  }
  if (state.endsAt != null && now >= state.endsAt) return new SaleEndedError(order.productId, state.endsAt);
  if (state.queued && !order.claim?.key.startsWith(passClaimKey('')))
    return new AdmissionRequiredError(order.productId);
  if (state.bought + order.quantity > state.perUserLimit) {
    return new LimitReachedError(order.userId, state.perUserLimit, state.bought, order.quantity);
  }
  if (state.stock <= 0) return new SoldOutError(order.productId);
  if (state.stock < order.quantity) return new InsufficientStockError(order.productId, state.stock, order.quantity);
  return null;
}
