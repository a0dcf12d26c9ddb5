/**
 * PostgreSQL's side of the audit: a product's `orders` rows (the settler's, src/settlement/),
 * read a page at a time in primary-key order with a keyset cursor, never in one reply.
 */
import { Client } from 'pg';
import type { SettledOrder } from '../history/history';

/** Rows per page. */
export const ROWS_PAGE = 1_000;

const COLUMNS = `order_id, user_id, quantity, status, round(extract(epoch FROM created_at) * 1000)::bigint AS created_ms`;

interface Row {
  order_id: string;
  user_id: string;
  quantity: number;
  status: SettledOrder['status'];
  created_ms: string;
}

/**
 * A connection for the audit; read-only unless it repairs, so that a mistake in the
 * audit can never write. Statements time out: a PostgreSQL that hangs fails the audit.
 */
export async function connectDatabase(url: string, options: { readonly write: boolean }): Promise<Client> {
  const client = new Client({
    connectionString: url,
    connectionTimeoutMillis: 10_000,
    statement_timeout: 60_000,
    query_timeout: 61_000,
    application_name: 'seckill-audit',
  });
  client.on('error', () => undefined);
  await client.connect();
  if (!options.write) await client.query('SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY');
  return client;
}

/** The product's rows, in order_id order, `page` at a time. */
export async function* readSettled(db: Client, productId: string, page = ROWS_PAGE): AsyncGenerator<SettledOrder> {
  // '' sorts before every order id: the first page.
  for (let after = ''; ;) {
    const { rows } = await db.query<Row>(
      `SELECT ${COLUMNS} FROM orders WHERE product_id = $1 AND order_id > $2 ORDER BY order_id LIMIT $3`,
      [productId, after, page],
    );
    for (const row of rows) yield settledOrder(row);
    if (rows.length < page) return;
    after = rows[rows.length - 1].order_id;
  }
}

/** The rows of these orders now (the audit's second look at what it found). */
export async function settledNow(db: Client, productId: string, orderIds: readonly string[]): Promise<SettledOrder[]> {
  const { rows } = await db.query<Row>(
    `SELECT ${COLUMNS} FROM orders WHERE product_id = $1 AND order_id = ANY($2::text[])`,
    [productId, orderIds],
  );
  return rows.map(settledOrder);
}

function settledOrder(row: Row): SettledOrder {
  return {
    orderId: row.order_id,
    userId: row.user_id,
    quantity: row.quantity,
    status: row.status,
    createdMs: Number(row.created_ms),
  };
}

interface EventRow {
  stream_id: string;
  order_id: string;
  event: 'created' | 'paid' | 'cancelled' | 'expired';
  user_id: string;
  quantity: number;
}

/**
 * The settled entries of the product's stream before `before` (every one when null), in
 * Redis's order, `page` at a time through a cursor of a read-only transaction: one sort
 * on the server, never the whole result in one reply. Each event with its order's buyer
 * and quantity (order_events joined to orders). Every sale of the product id is here:
 * the caller keeps the current sale's.
 */
export async function* readSettledEntries(
  db: Client,
  productId: string,
  before: string | null,
  page = ROWS_PAGE,
): AsyncGenerator<EventRow[]> {
  const [ms, seq] = before === null ? [null, null] : before.split('-');
  await db.query('BEGIN READ ONLY');
  try {
    await db.query(
      `DECLARE head NO SCROLL CURSOR FOR
         SELECT e.stream_id, e.order_id, e.event, o.user_id, o.quantity
           FROM order_events e JOIN orders o ON o.order_id = e.order_id
          WHERE e.product_id = $1
            AND ($2::bigint IS NULL OR (split_part(e.stream_id, '-', 1)::bigint, split_part(e.stream_id, '-', 2)::bigint) < ($2::bigint, $3::bigint))
          ORDER BY split_part(e.stream_id, '-', 1)::bigint, split_part(e.stream_id, '-', 2)::bigint, e.order_id`,
      [productId, ms, seq],
    );
    for (;;) {
      const { rows } = await db.query<EventRow>(`FETCH ${page} FROM head`);
      if (rows.length > 0) yield rows;
      if (rows.length < page) break;
    }
    await db.query('COMMIT');
  } catch (err) {
    await db.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
