/** What a purchase asks for; CreateOrderDto is the validated HTTP form of it. */
export interface OrderRequest {
  readonly productId: string;
  readonly userId: string;
  readonly quantity: number;
}

/** A purchase as POST /api/orders acknowledges it (201). */
export interface Order extends OrderRequest {
  /** Also a field of the order's entry in the product's order stream. */
  readonly orderId: string;
  /** Units left right after this order. */
  readonly remaining: number;
}
