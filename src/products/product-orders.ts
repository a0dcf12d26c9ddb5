import { Inject, Injectable, Optional } from '@nestjs/common';
import { DatabaseError, type Pool } from 'pg';
import { PostgresUnavailableError, SettlementOffError } from '../errors/errors';
import { PG_POOL } from '../settlement/settlement.constants';
import { OrderPage, SettledOrder } from './product';

/** SQLSTATE classes that say the server is away or busy, not that the statement is wrong. */
const UNAVAILABLE_CLASSES = ['08', '53', '57'];
/** The table not there yet: this instance has not migrated (PostgreSQL came up after it). */
const UNDEFINED_TABLE = '42P01';

interface OrderRow {
  order_id: string;
  user_id: string;
  quantity: number;
  status: SettledOrder['status'];
  payment_id: string | null;
  created_at: Date;
  updated_at: Date;
}

/**
 * A product's orders as PostgreSQL, the system of record, holds them (what the settler
 * wrote; an order not yet settled is not there). Pages by order id (keyset, index
 * orders_product_order), so a page costs the same however deep it is, and an order
 * settled while an admin pages is listed once at most: never skipped if its id is past
 * the cursor, never repeated.
 */
@Injectable()
export class ProductOrders {
  constructor(@Optional() @Inject(PG_POOL) private readonly pool?: Pool) {}

  async list(productId: string, limit: number, status?: string, cursor?: string): Promise<OrderPage> {
    if (!this.pool) throw new SettlementOffError();
    let rows: OrderRow[];
    try {
      // One row past the page says whether there is a next one, so the last page says null.
      ({ rows } = await this.pool.query<OrderRow>(
        `SELECT order_id, user_id, quantity, status, payment_id, created_at, updated_at
           FROM orders
          WHERE product_id = $1 AND ($2::text IS NULL OR status = $2) AND order_id > $3
          ORDER BY order_id
          LIMIT $4`,
        [productId, status ?? null, cursor ?? '', limit + 1],
      ));
    } catch (err) {
      throw unavailable(err) ?? err;
    }
    const items = rows.slice(0, limit).map((r): SettledOrder => ({
      orderId: r.order_id,
      userId: r.user_id,
      quantity: r.quantity,
      status: r.status,
      paymentId: r.payment_id,
      createdAt: r.created_at.toISOString(),
      updatedAt: r.updated_at.toISOString(),
    }));
    return { items, cursor: rows.length > limit ? items[items.length - 1].orderId : null };
  }
}

/**
 * The answer for a failure that says PostgreSQL is away rather than the statement wrong:
 * a refused or cut connection and the pool's timeouts (no SQLSTATE), a server shutting
 * down or out of resources, a statement timed out, the schema not migrated yet.
 */
function unavailable(err: unknown): PostgresUnavailableError | null {
  // The server's own errors carry a SQLSTATE; a socket's (ECONNREFUSED) and the pool's timeouts do not.
  const sqlState = err instanceof DatabaseError ? (err.code ?? null) : null;
  if (sqlState === UNDEFINED_TABLE) return new PostgresUnavailableError('PostgreSQL is not migrated yet; retry later');
  if (sqlState !== null && !UNAVAILABLE_CLASSES.includes(sqlState.slice(0, 2))) return null;
  return new PostgresUnavailableError(`PostgreSQL is not reachable (${(err as Error).message}); retry later`);
}
