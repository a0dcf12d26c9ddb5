import { Matches } from 'class-validator';
import { ORDER_ID_PATTERN } from '../../orders/order';
import { Omittable } from '../../validation/omittable';
import { PAGE_LIMIT_PATTERN, PAGE_LIMIT_RULE } from './list-products-query.dto';

/** Query of GET /api/products/:id/orders. */
export class ListOrdersQueryDto {
  /** Only the orders in this status (PostgreSQL's, as the settler wrote it); omitted: all. */
  @Omittable()
  @Matches(/^(?:reserved|paid|cancelled|expired)$/, {
    message: 'status must be one of reserved, paid, cancelled, expired',
  })
  readonly status?: string;

  /** The last page's `cursor` (the last order id it listed); omitted: from the first. */
  @Omittable()
  @Matches(ORDER_ID_PATTERN, { message: 'cursor must be the cursor a page of orders answered (an order id)' })
  readonly cursor?: string;

  /** Orders per page (at most). */
  @Omittable()
  @Matches(PAGE_LIMIT_PATTERN, { message: `limit ${PAGE_LIMIT_RULE}` })
  readonly limit?: string;
}
