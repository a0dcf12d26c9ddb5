import type { OrderStatusName } from '../orders/order';
/** A product's sale as GET /api/products/:id shows it. */
export interface Product {
  readonly id: string;
  readonly initialStock: number;
  readonly stock: number;
  readonly sold: number;
  readonly orders: number;
  readonly perUserLimit: number;
  /** How long an order waits for its payment (null: a sale started before payment deadlines). */
  readonly paymentTimeoutMs: number | null;
  /** When the sale opens and closes (ISO 8601, UTC), null when it has no such bound. */
  readonly startsAt: string | null;
  readonly endsAt: string | null;
  /** The sale's waiting room, null when buyers buy directly. */
  readonly queue: { readonly admitPerSecond: number; readonly passTtlMs: number } | null;
  /** Escrow buckets the stock is kept in (src/sale/buckets.ts); 1 for a product sold from one shard. */
  readonly buckets: number;
  /** Redis's clock now, the one startsAt and endsAt are judged by. */
  readonly serverTime: string;
}

/** One escrow bucket of a product, as GET /api/products/:id/buckets (admin) shows it. */
export interface ProductBucket {
  /** The product's id for bucket 0, `<id>~<n>` for the others: its keys' hash tag is `{p:<bucket id>}`. */
  readonly id: string;
  /** The Redis Cluster slot of its keys (CLUSTER KEYSLOT of any of them). */
  readonly slot: number;
  /** Its share of the sale's stock at the start. */
  readonly initialStock: number;
  /** Units it holds the rights to now. */
  readonly stock: number;
  /** Orders it sold (its buyers' home bucket). */
  readonly orders: number;
  /** Units it gave up to another bucket that have not landed there yet (move-out-4.lua). */
  readonly inFlight: number;
}

/** What POST /api/products/:id/close did: the sale ended, its reservations cancelled, settlement waited for. */
export interface ClosedSale {
  /** The product as it is after the close (its endsAt now or earlier). */
  readonly product: Product;
  /** Reservations this close cancelled, each unit back in stock once (paid orders stay paid). */
  readonly cancelled: number;
  /**
   * With settlement on: the product's order events not yet in PostgreSQL when the close
   * stopped waiting (0: a restart may discard the orders now); null where this instance does not settle
   * and no settler elsewhere marked the prefix (KeyLayout.settling).
   */
  readonly unsettled: number | null;
}

/** What DELETE /api/products/:id removed. */
export interface DeletedProduct {
  readonly id: string;
  /** Redis keys of the product deleted (its lock, released by the DELETE's own hold, and its fencing counter are not counted). */
  readonly keys: number;
  /** Orders deleted that PostgreSQL never had (only with `discardOrders`, where the prefix does not settle); else 0. */
  readonly discardedOrders: number;
}

/** A page of the catalog (GET /api/products): the next page's cursor, null after the last. */
export interface ProductPage {
  readonly items: readonly Product[];
  readonly cursor: string | null;
}

/** An order as PostgreSQL, the system of record, holds it. */
export interface SettledOrder {
  readonly orderId: string;
  readonly userId: string;
  readonly quantity: number;
  readonly status: OrderStatusName;
  readonly paymentId: string | null;
  readonly createdAt: string;
  readonly updatedAt: string;
}

/** A page of a product's orders, by order id: the next page's cursor, null after the last. */
export interface OrderPage {
  readonly items: readonly SettledOrder[];
  readonly cursor: string | null;
}
