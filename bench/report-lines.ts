/**
 * One-line figures of a row the report and the HTML report both print: settlement lag,
 * the idle catalog, the escrow buckets.
 */
import type { BucketFigures } from './buckets';
import type { CatalogFigures } from './catalog';

const n = (x: number) => x.toLocaleString('en-US');

/** Percentiles of the orders' settlement lag (bench/settled.ts), ms. */
export interface OrderLag {
  /** Orders measured: every order of the product PostgreSQL holds with its settled_at. */
  readonly orders: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /**
   * How the two clocks were put on one line: `one machine` (the bench's own Redis and
   * PostgreSQL), or Redis's brought to this machine's by the skew measured at the sale's
   * start (--redis: Redis may be elsewhere), in ms.
   */
  readonly clock: 'one machine' | { skewMs: number };
}

/** `p50 12 ms, p99 85 ms, max 97 ms from each of 1,000 orders' stream entry to PostgreSQL (...)`. */
export function orderLagLine(lag: OrderLag): string {
  const clock =
    lag.clock === 'one machine'
      ? "Redis's and PostgreSQL's clocks are one machine's"
      : `Redis's clock brought to this machine's by the skew measured at the sale's start, ${lag.clock.skewMs} ms`;
  return (
    `p50 ${lag.p50} ms, p99 ${lag.p99} ms, max ${lag.max} ms from each of ${n(lag.orders)} orders' stream entry ` +
    `to its row in PostgreSQL (goal: p99 <= 100 ms; ${clock})`
  );
}

/** `with 10,000 idle products listed (through the admin API in 4,120 ms; 10,000 in Redis's products set)`. */
export function catalogLine(c: CatalogFigures): string {
  const products = `${n(c.products)} idle product${c.products === 1 ? '' : 's'}`;
  return `with ${products} listed (through the admin API in ${n(c.listMs)} ms; ${n(c.listed)} in Redis's products set)`;
}

/**
 * `3 buckets (hot, hot~1, hot~4) on a Redis Cluster; 12 moves of rights into them`: where
 * a bucketed row's stock was kept, and how often a dry bucket was refilled.
 */
export function bucketsLine(b: BucketFigures): string {
  const where = b.cluster ? 'on a Redis Cluster' : 'on one Redis server (no --cluster: one thread serves every bucket)';
  const skew =
    b.skew === undefined
      ? ''
      : `; --skew ${b.skew}: ${Math.round(b.skew * 100)}% of the buyers chosen with bucket 0 (${b.ids[0]}) as their home`;
  return `${b.count} buckets (${b.ids.join(', ')}) ${where}; ${n(b.moves)} move${b.moves === 1 ? '' : 's'} of rights into them${skew}`;
}
