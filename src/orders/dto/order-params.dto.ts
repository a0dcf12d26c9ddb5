import { Matches } from 'class-validator';
import { ORDER_ID_PATTERN } from '../order';

/** The `:orderId` of /api/orders/:orderId routes: `<productId>.<uuid>`, as a 201 answered it. */
export class OrderParamsDto {
  @Matches(ORDER_ID_PATTERN, {
    message: 'orderId must be an order id as POST /api/orders answered it (<productId>.<uuid>)',
  })
  readonly orderId!: string;
}
