import {
  AppError,
  InsufficientStockError,
  LimitReachedError,
  SoldOutError,
  UnknownProductError,
} from '../errors/errors';
import type { OrderRequest } from './order';

/** What the rules look at: the product's limit, its stock, and the units this buyer already has. */
export interface SaleState {
  readonly perUserLimit: number;
  readonly stock: number;
  readonly bought: number;
}

/**
 * The rules of a sale, in the order a buyer is told about them: unknown product
 * (`state` null), then the per-user limit (so a repeat buyer hears LIMIT_REACHED
 * even after the sale sold out), then stock. Returns the refusal that applies, or
 * null when the order may be written.
 *
 * The one TypeScript copy of the rules: every purchase path decides with it, a batch
 * buyer by buyer against a running state. Their one Lua copy is purchase-7.lua;
 * sale-rules.spec.ts runs both on the same table of cases.
 */
export function refusal(order: OrderRequest, state: SaleState | null): AppError | null {
  if (state === null) return new UnknownProductError(order.productId);
  if (state.bought + order.quantity > state.perUserLimit) {
    return new LimitReachedError(order.userId, state.perUserLimit, state.bought, order.quantity);
  }
  if (state.stock <= 0) return new SoldOutError(order.productId);
  if (state.stock < order.quantity) return new InsufficientStockError(order.productId, state.stock, order.quantity);
  return null;
}
