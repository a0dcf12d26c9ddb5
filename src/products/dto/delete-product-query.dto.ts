import { Matches } from 'class-validator';
import { Omittable } from '../../validation/omittable';

/** `true` or `false`: a query string is text, so a pattern, not IsBoolean. */
const FLAG = /^(?:true|false)$/;

/** Query of DELETE /api/products/:id. */
export class DeleteProductQueryDto {
  /**
   * Where orders are not settled into PostgreSQL (no DATABASE_URL here, no settler
   * elsewhere), Redis is their only record: while there are any, the DELETE is refused
   * 409 ORDERS_UNSETTLED unless this is `true`. It never deletes orders a settler has
   * yet to write.
   */
  @Omittable()
  @Matches(FLAG, { message: 'discardOrders must be true or false' })
  readonly discardOrders?: string;

  /**
   * A sale another strategy family sells is deleted from this instance only when this is
   * `true` (its buyers are not excluded by this instance's hold): once no instance of that
   * family serves it. Otherwise 503 STRATEGY_MISMATCH, nothing changed.
   */
  @Omittable()
  @Matches(FLAG, { message: 'switchStrategy must be true or false' })
  readonly switchStrategy?: string;
}
