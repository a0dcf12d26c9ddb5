/** A purchase as POST /api/orders acknowledges it (201). */
export interface Order {
  /** Also a field of the order's entry in the product's order stream. */
  readonly orderId: string;
  readonly productId: string;
  readonly userId: string;
  readonly quantity: number;
  /** Units left right after this order. */
  readonly remaining: number;
}
