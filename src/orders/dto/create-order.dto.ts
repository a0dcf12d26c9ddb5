import { IsInt, Matches, Max, Min } from 'class-validator';
import { ID_PATTERN, ID_RULE, MAX_QUANTITY } from '../../sale/sale-limits';
import { Omittable } from '../../validation/omittable';

/**
 * Body of POST /api/orders. The product's own perUserLimit is checked by the service.
 * The route's JSON Schema is derived from these decorators (create-order.schema.ts).
 */
export class CreateOrderDto {
  @Matches(ID_PATTERN, { message: `productId ${ID_RULE}` })
  readonly productId!: string;

  @Matches(ID_PATTERN, { message: `userId ${ID_RULE}` })
  readonly userId!: string;

  /** Omitted means 1; null is refused, not defaulted. */
  @Omittable()
  // Decorators run bottom-up and only the first failure is reported: type first.
  @Max(MAX_QUANTITY)
  @Min(1)
  @IsInt()
  readonly quantity: number = 1;
}

/** Body of POST /api/products/:id/orders: the product is the URL's. */
export class ProductOrderDto {
  @Matches(ID_PATTERN, { message: `userId ${ID_RULE}` })
  readonly userId!: string;

  /** Omitted means 1; null is refused, not defaulted. */
  @Omittable()
  @Max(MAX_QUANTITY)
  @Min(1)
  @IsInt()
  readonly quantity: number = 1;
}
