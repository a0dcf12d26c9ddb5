import type { PoolClient } from 'pg';

/** One entry of a product's order stream, as the settler reads it. */
export interface StreamEvent {
  /** The entry's id: `<ms>-<seq>`, Redis's clock. */
  readonly streamId: string;
  readonly event: 'created' | 'paid' | 'cancelled' | 'expired';
  readonly orderId: string;
  readonly userId: string;
  readonly quantity: number;
  readonly paymentId: string | null;
}

const EVENTS = new Set(['paid', 'cancelled', 'expired']);

/**
 * An XREADGROUP/XAUTOCLAIM entry as an event: an order's own entry (no `event` field:
 * the purchase scripts write orderId, userId, quantity) is `created`; order-outcome-6.lua
 * appends `paid`, `cancelled` and `expired`. null for an entry that is neither (skipped,
 * acknowledged: nothing of ours to settle).
 */
export function parseEntry(streamId: string, fields: readonly string[]): StreamEvent | null {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i], fields[i + 1]);
  const orderId = f.get('orderId');
  const userId = f.get('userId');
  const quantity = Number(f.get('quantity'));
  const event = f.get('event') ?? 'created';
  if (!orderId || !userId || !Number.isInteger(quantity) || quantity < 1) return null;
  if (event !== 'created' && !EVENTS.has(event)) return null;
  return {
    streamId,
    event: event as StreamEvent['event'],
    orderId,
    userId,
    quantity,
    paymentId: f.get('paymentId') ?? null,
  };
}

/** The ms of a stream id: the time Redis wrote the entry. */
export function streamMs(streamId: string): number {
  return Number(streamId.slice(0, streamId.indexOf('-')));
}

/**
 * Writes one product's batch of events, inside the caller's transaction, so that
 * writing the same batch again (a redelivery after a crash between COMMIT and XACK)
 * changes nothing, and a batch's events may arrive in any order across batches (a
 * claimed older batch settled after a newer one) and still end in the same rows:
 *
 * - `order_events`: one row per stream entry, `ON CONFLICT DO NOTHING` by (product,
 *   stream id): each event recorded exactly once.
 * - `orders`, created: inserted as `reserved`; if the row is there already (its
 *   terminal event came first) only its created_at is set.
 * - `orders`, paid/cancelled/expired: the row takes that status if it is `reserved`
 *   (or is inserted with it); a terminal status never changes, since Redis gives an
 *   order exactly one.
 *
 * Three statements, each one multi-row (the rows as one JSON parameter), whatever the batch's size.
 */
export async function writeBatch(client: PoolClient, productId: string, events: readonly StreamEvent[]): Promise<void> {
  // One row per order per statement (an upsert may not touch a row twice): an order
  // has one entry and at most one terminal event, so a second is a duplicate entry.
  const created = firstPerOrder(events.filter((e) => e.event === 'created'));
  const ended = firstPerOrder(events.filter((e) => e.event !== 'created'));
  // Each statement takes its rows as one JSON array of arrays: JSON.stringify is native,
  // where node-postgres escapes every element of a text[] parameter in JavaScript (a
  // quarter of the settler's CPU per order in a contended sale's profile).
  await client.query(
    `INSERT INTO order_events (product_id, stream_id, order_id, event, at)
     SELECT $1, r->>0, r->>1, r->>2, to_timestamp((r->>3)::bigint / 1000.0)
       FROM json_array_elements($2::json) AS r
     ON CONFLICT (product_id, stream_id, order_id) DO NOTHING`,
    [productId, JSON.stringify(events.map((e) => [e.streamId, e.orderId, e.event, streamMs(e.streamId)]))],
  );
  if (created.length > 0) {
    await client.query(
      `INSERT INTO orders (order_id, product_id, user_id, quantity, status, created_at, updated_at)
       SELECT r->>0, $1, r->>1, (r->>2)::int, 'reserved',
              to_timestamp((r->>3)::bigint / 1000.0), to_timestamp((r->>3)::bigint / 1000.0)
         FROM json_array_elements($2::json) AS r
       ON CONFLICT (order_id) DO UPDATE SET created_at = EXCLUDED.created_at`,
      [productId, JSON.stringify(created.map((e) => [e.orderId, e.userId, e.quantity, streamMs(e.streamId)]))],
    );
  }
  if (ended.length > 0) {
    // created_at is a placeholder (the event's time) until the order's own entry is settled.
    await client.query(
      `INSERT INTO orders (order_id, product_id, user_id, quantity, status, payment_id, created_at, updated_at)
       SELECT r->>0, $1, r->>1, (r->>2)::int, r->>3, r->>4,
              to_timestamp((r->>5)::bigint / 1000.0), to_timestamp((r->>5)::bigint / 1000.0)
         FROM json_array_elements($2::json) AS r
       ON CONFLICT (order_id) DO UPDATE
         SET status = EXCLUDED.status, payment_id = EXCLUDED.payment_id, updated_at = EXCLUDED.updated_at
         WHERE orders.status = 'reserved'`,
      [
        productId,
        JSON.stringify(ended.map((e) => [e.orderId, e.userId, e.quantity, e.event, e.paymentId, streamMs(e.streamId)])),
      ],
    );
  }
}

function firstPerOrder(events: readonly StreamEvent[]): StreamEvent[] {
  const seen = new Set<string>();
  return events.filter((e) => !seen.has(e.orderId) && seen.add(e.orderId));
}
