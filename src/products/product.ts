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
  /** Redis's clock now, the one startsAt and endsAt are judged by. */
  readonly serverTime: string;
}
