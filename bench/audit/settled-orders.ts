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
