import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { Client } from 'pg';
import type { ProductKeys } from '../src/redis/key-layout';
import { SETTLE_GROUP } from '../src/settlement/settler';
import type { SettledOrder } from './history/history';
import type { OrderLag } from './report';

const STATUS = { R: 'reserved', P: 'paid', C: 'cancelled', E: 'expired' } as const;

/** Samples of how many of a product's stream entries are not settled yet, over time. */
export interface LagPoint {
  /** Since the sale's start, ms. */
  readonly ms: number;
  readonly unsettled: number;
}

/**
 * A product's keys, or with escrow buckets (src/sale/buckets.ts) every bucket's
 * (bench/buckets.ts bucketKeys()): its orders are settled from each bucket's stream
 * and stored in PostgreSQL under the product's id, its states kept per bucket.
 */
export type SaleKeys = ProductKeys | readonly ProductKeys[];

const eachBucket = (k: SaleKeys): readonly ProductKeys[] => (Array.isArray(k) ? k : [k as ProductKeys]);

/**
 * Entries of the streams not settled yet: the settle group's pending ones plus those it
 * has not delivered, over every bucket's stream.
 */
export async function unsettled(redis: Pick<Redis, 'xinfo' | 'xlen' | 'xrange'>, k: SaleKeys): Promise<number> {
  const each = await Promise.all(eachBucket(k).map((b) => unsettledOf(redis, b)));
  return each.reduce((a, b) => a + b, 0);
}

/** One stream's: before any settler met it (no group), all of its entries. */
async function unsettledOf(redis: Pick<Redis, 'xinfo' | 'xlen' | 'xrange'>, k: ProductKeys): Promise<number> {
  let groups: unknown[][];
  try {
    groups = (await redis.xinfo('GROUPS', k.orders)) as unknown[][];
  } catch (err) {
    // No stream: nothing to settle. Anything else (Redis away) is not "drained".
    if (/no such key/i.test(String(err))) return 0;
    throw err;
  }
  for (const g of groups) {
    const f = new Map<string, unknown>();
    for (let i = 0; i + 1 < g.length; i += 2) f.set(String(g[i]), g[i + 1]);
    if (f.get('name') !== SETTLE_GROUP) continue;
    const lag = f.get('lag');
    const pending = Number(f.get('pending'));
    if (lag !== null && lag !== undefined) return pending + Number(lag);
    // `lag` is nil when Redis cannot tell (entries deleted): count what follows the last delivered.
    return pending + (await redis.xrange(k.orders, `(${String(f.get('last-delivered-id'))}`, '+')).length;
  }
  return redis.xlen(k.orders);
}

/**
 * Waits until settlement has caught up with the product's stream (nothing pending,
 * nothing undelivered); the ms it took, or null if it had not after `timeoutMs`.
 * `sample` gets each reading, for the report's lag line.
 */
export async function waitForSettlement(
  redis: Pick<Redis, 'xinfo' | 'xlen' | 'xrange'>,
  k: SaleKeys,
  timeoutMs: number,
  sample?: (unsettled: number) => void,
): Promise<number | null> {
  const start = Date.now();
  for (;;) {
    const n = await unsettled(redis, k);
    sample?.(n);
    if (n === 0) return Date.now() - start;
    if (Date.now() - start > timeoutMs) return null;
    await sleep(50);
  }
}

/** What PostgreSQL holds of a product, against what Redis does. */
export interface SettledCheck {
  readonly ok: boolean;
  /** Rows in `orders` for the product. */
  readonly rows: number;
  readonly byStatus: Record<string, number>;
  /** The rows themselves, for the history checker's total queue (bench/history/check.ts). */
  readonly orders: SettledOrder[];
  /** What differs, when something does. */
  readonly problem?: string;
}

/**
 * Invariant 7, read from both stores: every order Redis has (its states hash, each
 * bucket's) is in
 * PostgreSQL's `orders` exactly once (the primary key) with the same status, none is
 * there that Redis does not have, and `order_events` holds each order's created entry
 * once and at most one ending. Call it once settlement has drained.
 */
export async function checkSettled(
  databaseUrl: string,
  redis: Pick<Redis, 'hgetall'>,
  k: SaleKeys,
  productId: string,
): Promise<SettledCheck> {
  // An order is in the states of the bucket that sold it, and in PostgreSQL under the product.
  const states: Record<string, string> = Object.assign(
    {},
    ...(await Promise.all(eachBucket(k).map((b) => redis.hgetall(b.states)))),
  );
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{
      order_id: string;
      status: string;
      user_id: string;
      quantity: number;
      payment_id: string | null;
      created_at: Date;
    }>('SELECT order_id, status, user_id, quantity, payment_id, created_at FROM orders WHERE product_id = $1', [
      productId,
    ]);
    const { rows: events } = await client.query<{ order_id: string; created: number; ended: number }>(
      `SELECT order_id, count(*) FILTER (WHERE event = 'created')::int AS created,
              count(*) FILTER (WHERE event <> 'created')::int AS ended
         FROM order_events WHERE product_id = $1 GROUP BY order_id`,
      [productId],
    );
    const inPg = new Map(rows.map((r) => [r.order_id, r]));
    const eventsOf = new Map(events.map((e) => [e.order_id, e]));
    const byStatus: Record<string, number> = {};
    for (const r of rows) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
    const missing = Object.keys(states).filter((id) => !inPg.has(id));
    const extra = rows.filter((r) => !(r.order_id in states));
    // The row as Redis has it: R|user|quantity, P|user|quantity|paymentId, C|..., E|...
    const wrong = Object.entries(states).filter(([id, s]) => {
      const row = inPg.get(id);
      if (!row) return false;
      const [status, user, quantity, payment] = s.split('|');
      return (
        row.status !== STATUS[status as keyof typeof STATUS] ||
        row.user_id !== user ||
        row.quantity !== Number(quantity) ||
        (row.payment_id ?? '') !== (status === 'P' ? payment : '')
      );
    });
    // Every order's own entry once, and its ending once if it has ended, none if not.
    const badEvents = Object.entries(states).filter(([id, s]) => {
      const e = eventsOf.get(id);
      return !e || e.created !== 1 || e.ended !== (s[0] === 'R' ? 0 : 1);
    });
    const ok = missing.length === 0 && extra.length === 0 && wrong.length === 0 && badEvents.length === 0;
    return {
      ok,
      rows: rows.length,
      byStatus,
      orders: rows.map((r) => ({
        orderId: r.order_id,
        userId: r.user_id,
        quantity: r.quantity,
        status: r.status as SettledOrder['status'],
        createdMs: r.created_at.getTime(),
      })),
      ...(!ok && {
        problem:
          `settled: ${missing.length} orders of Redis not in PostgreSQL, ${extra.length} rows Redis does not have, ` +
          `${wrong.length} that differ (${wrong
            .slice(0, 3)
            .map(([id, s]) => `${id}: Redis ${s}, PostgreSQL ${JSON.stringify(inPg.get(id))}`)
            .join('; ')}), ${badEvents.length} orders whose events are not once each`,
      }),
    };
  } finally {
    await client.end();
  }
}

/**
 * The product's orders' settlement lag percentiles: from each order's stream entry
 * (`at`, Redis's clock, whole ms) to its row's insert (`settled_at`, PostgreSQL's clock,
 * migration 003), less `skewMs` (Redis's clock less this machine's, where PostgreSQL
 * runs) when Redis may be elsewhere. Orders only (`created`): when each sale reached
 * the system of record. null when none has a settled_at.
 */
export async function orderLag(
  databaseUrl: string,
  productId: string,
  skewMs: number | null,
): Promise<OrderLag | null> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ orders: number; p50: number; p99: number; max: number }>(
      `SELECT count(*)::int AS orders,
              percentile_disc(0.5) WITHIN GROUP (ORDER BY lag) AS p50,
              percentile_disc(0.99) WITHIN GROUP (ORDER BY lag) AS p99,
              max(lag) AS max
         FROM (SELECT (extract(epoch FROM settled_at - at) * 1000 + $2)::float8 AS lag
                 FROM order_events
                WHERE product_id = $1 AND event = 'created' AND settled_at IS NOT NULL) AS l`,
      [productId, skewMs ?? 0],
    );
    const [r] = rows;
    if (r.orders === 0) return null;
    const ms = (x: number) => Math.round(x * 10) / 10;
    return {
      orders: r.orders,
      p50: ms(r.p50),
      p99: ms(r.p99),
      max: ms(r.max),
      clock: skewMs === null ? 'one machine' : { skewMs },
    };
  } finally {
    await client.end();
  }
}
