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
}
