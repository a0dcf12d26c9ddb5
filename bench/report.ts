import { historyLine } from './history/check';
import type { Opening } from './starts-in';
import type { QueueFigures } from './queue-load';
import type { Cost } from './cost';
import type { LatencyPoint } from './latency-curve';
import type { SoldPoint } from './timeline';
import { HistoryVerdict, peakOversold, ProductVerdict, Verdict } from './verdict';
import { bucketsLine, catalogLine, OrderLag, orderLagLine } from './report-lines';
import type { BucketFigures } from './buckets';
import type { CatalogFigures } from './catalog';

export { bucketsLine, catalogLine, orderLagLine };
export type { OrderLag };

/** One product of a row that sold several (--products N): its own verdict, and whether it passed as its row must. */
export interface ProductRow extends ProductVerdict {
  readonly pass: boolean;
}

/**
 * One strategy's result, as written to the JSON file. With --products N > 1 its sale
 * figures and invariants are the totals over the products (an invariant holds when it
 * holds for every one), `stock` is all the units on sale, and `products` has each one.
 */
export interface Row extends Verdict {
  readonly strategy: string;
  /** The row's name in tables and charts: the strategy, its workers, its telemetry if off (rowLabel). */
  readonly label: string;
  /** A deliberately broken strategy: its row passes when it shows its failure. */
  readonly unsafe: boolean;
  readonly buyers: number;
  readonly requests: number;
  readonly connections: number;
  readonly stock: number;
  readonly quantity: number;
  readonly workers: number;
  /** False for a row whose app ran with TELEMETRY=0 (--telemetry off). */
  readonly telemetry: boolean;
  readonly durationMs: number;
  /** Requests / wall seconds of the measured pass. */
  readonly throughput: number;
  readonly latency: { p50: number; p90: number; p99: number; max: number };
  /** Every answer's latency, as a percentile curve (the first pass's, not --retries'). */
  readonly latencyByPercentile: LatencyPoint[];
  /** Units sold since the load started, from the order stream (all products together). */
  readonly soldOverTime: SoldPoint[];
  readonly status: Record<string, number>;
  readonly codes: Record<string, number>;
  readonly errors: number;
  readonly timeouts: number;
  /** False for a row whose app ran without DATABASE_URL (--settle off): nothing settled. */
  readonly settle?: boolean;
  /** --auth: the buyer tokens the row's app verified (hs256, es256); absent: none. */
  readonly auth?: string;
  /** A settling row: its throughput divided by the same strategy's without settlement, same run. */
  readonly vsSettleOff?: { throughput: number };
  /** A telemetry-off row: its throughput divided by the same strategy's with telemetry on, same run. */
  readonly vsTelemetryOn?: { throughput: number };
  /** With --baseline: this row's throughput and p99 divided by the baseline's, same run. */
  readonly vsBaseline?: { throughput: number; p99: number };
  /** What the measured pass cost the app and Redis (bench/cost.ts). */
  readonly cost: Cost;
  /** With --sold-out-path: this row's app CPU per request divided by the bare Fastify route's, same run. */
  readonly vsFastifyRoute?: { appCpuPerRequest: number };
  /** Measured sales run: more than 1 only for a `none` control that did not oversell at first. */
  readonly attempts: number;
  /** With --products N > 1: each product's figures and invariants. */
  readonly products?: ProductRow[];
  /** With settlement on: PostgreSQL after the sale (bench/settled.ts), and --pay's afterlife. */
  readonly settlement?: SettlementRow;
  /** --starts-in: how the sale opened (bench/starts-in.ts). */
  readonly opening?: Opening;
  /** --queue: the sale's waiting room, and what it did (bench/queue-load.ts). */
  readonly queue?: QueueFigures;
  /** A row behind a waiting room: its app CPU per request divided by the same set-up's without one, same run. */
  readonly vsNoQueue?: { appCpuPerRequest: number };
  /** --catalog N: the idle products listed before the row's sale (absent: none). */
  readonly catalog?: CatalogFigures;
  /** A row with a catalog: its throughput divided by the same set-up's without one, same run. */
  readonly vsNoCatalog?: { throughput: number };
  /** --buckets N > 1: the measured product's escrow buckets and the moves between them (bench/buckets.ts). */
  readonly buckets?: BucketFigures;
  /** False when any product (or the totals) fails. */
  readonly pass: boolean;
}

/** A row's settlement: how fast it caught up, and what PostgreSQL holds. */
export interface SettlementRow {
  /** From the end of the (last) load to nothing unsettled, ms; null if it had not caught up in time. */
  readonly drainMs: number | null;
  /** Rows in PostgreSQL's `orders` for the measured product, and per status. */
  readonly rows: number;
  readonly byStatus: Record<string, number>;
  /** Unsettled stream entries over time (ms since the load's start). */
  readonly lag: { ms: number; unsettled: number }[];
  /**
   * Each order's settlement lag, ms: from its stream entry (Redis's clock) to its row's
   * insert in the settling transaction (order_events.settled_at, PostgreSQL's clock), over
   * the measured product's orders; absent if settlement did not catch up.
   */
  readonly orderLag?: OrderLag;
  /** --pay: orders paid, cancelled and left to expire, what was refused, and the second wave. */
  readonly afterlife?: {
    readonly paid: number;
    readonly cancelled: number;
    readonly leftToExpire: number;
    readonly refused: Record<string, number>;
    readonly unitsReturned: number;
    readonly secondWave: { buyers: number; created: number; refused: Record<string, number> };
  };
}

/**
 * Mistakes that only fail when something goes wrong at the wrong moment (a crash,
 * a pause, a skewed clock): plain load cannot show it, this test does.
 */
export const FAILURE_SHOWN_BY: Readonly<Record<string, string>> = {
  'setnx-no-ttl': 'classic-mistakes.spec.ts: setnx-no-ttl',
  'setnx-then-expire': 'classic-mistakes.spec.ts: setnx-then-expire',
  'unchecked-del': 'classic-mistakes.spec.ts: unchecked-del',
  'get-then-del': 'classic-mistakes.spec.ts: get-then-del',
  'expiry-timestamp': 'classic-mistakes.spec.ts: expiry-timestamp',
};

const n = (x: number | null) => (x === null ? '-' : x.toLocaleString('en-US'));

/** `fenced`, `lock ×2`, `fenced telemetry-off`: what tells the rows of one run apart. */
export function rowLabel(
  r: Pick<Row, 'strategy' | 'workers' | 'telemetry'> & {
    settle?: boolean;
    auth?: string;
    queue?: Pick<QueueFigures, 'admitPerSecond'>;
    catalog?: Pick<CatalogFigures, 'products'>;
    buckets?: Pick<BucketFigures, 'count'>;
  },
): string {
  return `${r.strategy}${r.workers > 1 ? ` ×${r.workers}` : ''}${r.telemetry === false ? ' telemetry-off' : ''}${
    r.settle === false ? ' settle-off' : ''
  }${r.auth ? ` auth-${r.auth}` : ''}${r.queue ? ` queue-${r.queue.admitPerSecond}/s` : ''}${
    r.catalog ? ` catalog-${r.catalog.products}` : ''
  }${r.buckets ? ` buckets-${r.buckets.count}` : ''}`;
}

/** A row's set-up: its value of each option that makes rows (bench/bench.ts). */
function setUp(r: Row) {
  return {
    strategy: r.strategy,
    workers: r.workers,
    telemetry: r.telemetry,
    settle: r.settle,
    auth: r.auth,
    queue: r.queue?.admitPerSecond ?? 0,
    catalog: r.catalog?.products ?? 0,
    buckets: r.buckets?.count ?? 1,
  };
}

/**
 * The row of the same run whose set-up is `row`'s with `change` made: what a row is
 * compared with (telemetry on, settlement off, no waiting room, no catalog), every other
 * option the same.
 */
export function twin(rows: readonly Row[], row: Row, change: Partial<ReturnType<typeof setUp>>): Row | undefined {
  const want = { ...setUp(row), ...change };
  return rows.find((r) => {
    const has = setUp(r);
    return (Object.keys(want) as (keyof typeof want)[]).every((k) => has[k] === want[k]);
  });
}
const label = rowLabel;

/** The table's result cell: PASS, FAIL (...), or for an unsafe strategy whether it showed its failure. */
export function rowResult(row: Row): string {
  const broken = Object.entries(row.invariants)
    .filter(([, ok]) => !ok)
    .map(([name]) => name);
  if (!row.unsafe) return row.pass ? 'PASS' : `FAIL (${broken.join(', ') || 'app exit'})`;
  if (row.pass) return `expected failure shown (${broken.join(', ')})`;
  const test = FAILURE_SHOWN_BY[row.strategy];
  return test ? `FLAGGED: no failure under plain load; shown by ${test}` : 'FLAGGED: no failure seen';
}

/**
 * What each row's pass cost. A separate table, so the first one keeps the columns
 * other tools read. Per sale counts all of the pass's Redis work, sold-out answers
 * included: it is a product's price on one shard in a contended sale.
 */
function costTable(rows: Row[]): string[] {
  const vsRoute = rows.some((r) => r.vsFastifyRoute);
  const header =
    '| strategy | app CPU µs/req | Redis CPU µs/req | Redis CPU µs/sale | Redis cmds/sale | sales/s ceiling (1 Redis thread) |' +
    (vsRoute ? ' app CPU vs fastify-route |' : '');
  const lines = [header, `|${header.slice(1).replace(/[^|]+/g, '---')}`];
  const fixed = (x: number | null, digits: number) => (x === null ? '-' : x.toFixed(digits));
  for (const r of rows) {
    const c = r.cost;
    lines.push(
      `| ${label(r)} | ${fixed(c.appCpuUsPerRequest, 1)} | ${fixed(c.redisCpuUsPerRequest, 2)} | ` +
        `${fixed(c.redisCpuUsPerSale, 1)} | ${fixed(c.redisCommandsPerSale, 2)} | ${n(c.salesPerSecCeiling)} |` +
        (vsRoute ? ` ${r.vsFastifyRoute ? `${r.vsFastifyRoute.appCpuPerRequest.toFixed(2)}x` : '-'} |` : ''),
    );
  }
  return lines;
}

/**
 * On more than one Redis node, each node's part of each row's pass: a shard runs its
 * commands on one thread, so the busiest shard's Redis CPU per sale sets the row's
 * ceiling (1 s / it), however many shards share the rest.
 */
function shardTable(rows: Row[]): string[] {
  if (!rows.some((r) => r.cost.shards.length > 1)) return [];
  const header = '| strategy | shard | Redis CPU µs/sale | Redis cmds/sale | share | sales/s ceiling (busiest shard) |';
  const lines = [header, `|${header.slice(1).replace(/[^|]+/g, '---')}`];
  const fixed = (x: number | null, digits: number) => (x === null ? '-' : x.toFixed(digits));
  for (const r of rows.filter((x) => x.cost.shards.length > 1)) {
    const ceiling = busiestShardCeiling(r);
    for (const s of r.cost.shards) {
      lines.push(
        `| ${label(r)} | ${s.node} | ${fixed(s.cpuUsPerSale, 1)} | ${fixed(s.commandsPerSale, 2)} | ` +
          `${Math.round(s.share * 100)}% | ${n(ceiling)} |`,
      );
    }
  }
  return ['', ...lines];
}

/** 1 s / the busiest node's Redis CPU per sale: sales per second before that node's one thread is full; null if nothing sold. */
export function busiestShardCeiling(r: Pick<Row, 'cost'>): number | null {
  const busiest = Math.max(0, ...r.cost.shards.map((s) => s.cpuUsPerSale ?? 0));
  return busiest > 0 ? Math.round(1e6 / busiest) : null;
}

/**
 * With --products N > 1, one line per product of each row: the same sale columns, so a
 * failing product is found at a glance among a dozen.
 */
function productTable(rows: Row[]): string[] {
  if (!rows.some((r) => r.products)) return [];
  const header =
    '| strategy | product | result | requests | 201 | 409 | 5xx | sold | stock | left | oversold | sell-out ms |';
  const lines = [header, `|${header.slice(1).replace(/[^|]+/g, '---')}`];
  for (const r of rows) {
    for (const p of r.products ?? []) {
      const fiveXx = Object.entries(p.status)
        .filter(([s]) => s.startsWith('5'))
        .reduce((a, [, k]) => a + k, 0);
      const broken = Object.entries(p.invariants)
        .filter(([, ok]) => !ok)
        .map(([name]) => name)
        .join(', ');
      lines.push(
        `| ${label(r)} | ${p.id} | ${productResult(r, p.pass, broken)} | ${n(p.requests)} | ` +
          `${n(p.status['201'] ?? 0)} | ${n(p.status['409'] ?? 0)} | ${n(fiveXx)} | ${n(p.sold)} | ${n(p.stock)} | ` +
          `${n(p.stockLeft)} | ${n(p.oversold)} | ${n(p.sellOutMs)} |`,
      );
    }
  }
  return ['', ...lines];
}

/** As the row's result, short: an unsafe strategy's product passes when it shows its failure. */
function productResult(row: Row, pass: boolean, broken: string): string {
  if (row.unsafe) return pass ? `failure shown (${broken})` : 'no failure seen';
  return pass ? 'PASS' : `FAIL (${broken || 'app exit'})`;
}

/** `shard 127.0.0.1:7001 34% · 127.0.0.1:7002 33% · …`: whether a row's Redis work spread over the nodes. */
export function shardSplit(row: Row): string {
  const parts = row.cost.shards.map((s) => `${s.node} ${Math.round(s.share * 100)}%`);
  return `per-shard CPU split: ${label(row)}: shard ${parts.join(' · ')}`;
}

/**
 * Markdown tables (the figures, the costs, each product's line when there are several)
 * plus one verdict line per strategy and, on more than one Redis node, its CPU split;
 * `tables` is the tables alone, `failed` decides the exit code.
 */
export function formatReport(rows: Row[]): { text: string; tables: string; failed: boolean } {
  const ratios = rows.some((r) => r.vsBaseline);
  const header =
    '| strategy | result | req/s | p50 ms | p99 ms | max ms | 201 | 409 | 5xx | sold | left | oversold | sell-out ms | sales/s |' +
    (ratios ? ' req/s vs baseline | p99 vs baseline |' : '');
  const lines = [header, `|${header.slice(1).replace(/[^|]+/g, '---')}`];
  for (const r of rows) {
    const count = (prefix: string) =>
      Object.entries(r.status)
        .filter(([s]) => s.startsWith(prefix))
        .reduce((a, [, k]) => a + k, 0);
    lines.push(
      `| ${label(r)} | ${rowResult(r)} | ${n(r.throughput)} | ${r.latency.p50} | ${r.latency.p99} | ` +
        `${r.latency.max} | ${n(r.status['201'] ?? 0)} | ${n(r.status['409'] ?? 0)} | ${n(count('5'))} | ${n(r.sold)} | ` +
        `${n(r.stockLeft)} | ${n(r.oversold)} | ${n(r.sellOutMs)} | ${n(r.salesPerSec)} |` +
        (ratios ? ` ${r.vsBaseline?.throughput.toFixed(2) ?? '-'}x | ${r.vsBaseline?.p99.toFixed(2) ?? '-'}x |` : ''),
    );
  }
  lines.push('', ...costTable(rows), ...shardTable(rows), ...productTable(rows), '');
  const tables = lines.join('\n').trimEnd();
  let failed = false;
  const route = rows.find((r) => r.strategy === 'fastify-route');
  for (const r of rows) {
    const allHold = Object.values(r.invariants).every(Boolean);
    if ((r.strategy === 'fastify-route' || r.strategy === 'raw-http') && r.pass) {
      // It keeps no stock: there is nothing in Redis to check, only its answers.
      lines.push(
        `verdict: ${r.strategy} answered all ${n(r.requests)} requests, none with a 5xx (it has no store to check)`,
      );
    } else if (!r.unsafe && r.pass) {
      const each = r.products ? ` over ${r.products.length} products` : '';
      lines.push(
        `verdict: ${label(r)} sold ${n(r.sold)} of ${n(r.stock)}${each} to ${n(r.distinctBuyers)} buyers; ` +
          `every invariant holds${r.products ? ' for each product' : ''} (checked from Redis) — ` +
          `${n(r.requests)} requests in ${(r.durationMs / 1000).toFixed(1)} s`,
      );
      if (r.opening) lines.push(`opening: ${label(r)} ${openingLine(r.opening)}`);
    } else if (!r.unsafe) {
      failed = true;
      lines.push(`verdict: ${label(r)} FAILED: ${r.problems.join('; ')}`);
    } else if (peakOversold(r) > 0) {
      const retried = r.attempts > 1 ? ` in sale ${r.attempts} (the earlier ones did not oversell)` : '';
      const where = r.products
        ? ` in ${r.products.filter((p) => peakOversold(p) > 0).length} of ${r.products.length} products`
        : '';
      lines.push(
        `verdict: ${label(r)} oversold by ${n(peakOversold(r))}${where}${retried} at its peak` +
          `${r.history ? ` (${peakAt(r.history)})` : ''}; ${n(r.oversold)} at the end ` +
          `(${n(r.sold)} units sold of ${n(r.stock)}) — expected: it is unsafe`,
      );
    } else if (!allHold) {
      const classic = FAILURE_SHOWN_BY[r.strategy]
        ? `; its classic failure is shown by ${FAILURE_SHOWN_BY[r.strategy]}`
        : '';
      lines.push(`verdict: ${label(r)} (unsafe) broke ${r.problems.join('; ')}${classic}`);
    } else if (FAILURE_SHOWN_BY[r.strategy]) {
      lines.push(
        `verdict: ${label(r)} held up under plain load; its failure needs a fault, shown by ${FAILURE_SHOWN_BY[r.strategy]}`,
      );
    } else {
      lines.push(
        `verdict: ${label(r)} did NOT oversell and kept every invariant: the bench cannot see the failure it exists to show`,
      );
    }
    // The negative control must oversell at some instant, or the bench is blind.
    if (r.strategy === 'none' && peakOversold(r) === 0) failed = true;
  }
  for (const r of rows) lines.push(...historyLines(r));
  for (const r of rows) if (r.cost.shards.length > 1) lines.push(shardSplit(r));
  for (const r of rows) if (r.buckets) lines.push(`buckets: ${label(r)}: ${bucketsLine(r.buckets)}`);
  for (const r of rows) {
    if (!r.vsTelemetryOn) continue;
    const on = twin(rows, r, { telemetry: true });
    lines.push(
      `telemetry: ${label(r)} served ${n(r.throughput)} req/s, with it on ${n(on?.throughput ?? null)}: ` +
        `off/on throughput ${r.vsTelemetryOn.throughput.toFixed(2)}x (same run)`,
    );
  }
  for (const r of rows) {
    if (!r.settlement) continue;
    const s = r.settlement;
    lines.push(
      `settlement: ${label(r)} settled ${n(s.rows)} orders into PostgreSQL (${Object.entries(s.byStatus)
        .map(([status, k]) => `${status} ${n(k)}`)
        .join(', ')}), caught up ${s.drainMs === null ? 'never' : `${n(s.drainMs)} ms`} after the last answer` +
        (r.vsSettleOff
          ? `; throughput ${r.vsSettleOff.throughput.toFixed(2)}x the same strategy's without settlement (same run)`
          : ''),
    );
    if (s.orderLag) lines.push(`settlement lag: ${label(r)} ${orderLagLine(s.orderLag)}`);
  }
  for (const r of rows) {
    if (!r.catalog) continue;
    const without = twin(rows, r, { catalog: 0 });
    lines.push(
      `catalog: ${label(r)} served ${n(r.throughput)} req/s ${catalogLine(r.catalog)}` +
        (without && r.vsNoCatalog
          ? `; ${label(without)} without them ${n(without.throughput)}: with/without throughput ` +
            `${r.vsNoCatalog.throughput.toFixed(2)}x (same run; goal >= 0.95x)`
          : ''),
    );
  }
  for (const r of rows) {
    if (!route || r === route || !r.vsFastifyRoute) continue;
    lines.push(
      `sold-out path: ${label(r)} spends ${r.cost.appCpuUsPerRequest} µs of app CPU per request, the bare Fastify ` +
        `route ${route.cost.appCpuUsPerRequest} µs: ${r.vsFastifyRoute.appCpuPerRequest.toFixed(2)}x`,
    );
  }
  return { text: lines.join('\n'), tables, failed };
}

/** `history: fenced: <the checker's line>`, one per product that has a history report. */
export function historyLines(r: Row): string[] {
  const of = (name: string, h: HistoryVerdict) => `history: ${name}: ${historyLine(h, h.startMs)}`;
  if (r.products) return r.products.flatMap((p) => (p.history ? [of(`${label(r)} ${p.id}`, p.history)] : []));
  return r.history ? [of(label(r), r.history)] : [];
}

/** `1,339 units held of 1,000, 412 ms after the first request`: the peak, on the row's time axis. */
export function peakAt(h: HistoryVerdict): string {
  const at = h.peak.ms === null ? '' : `, ${n(h.peak.ms - h.startMs)} ms after the first request (Redis's clock)`;
  return `${n(h.peak.units)} units held of ${n(h.stock)}${at}`;
}

/** --starts-in: what the first second after the start sold, and that nothing sold before it. */
export function openingLine(o: Opening): string {
  return (
    `opened at ${new Date(o.startsAt).toISOString()} (Redis's clock): ${n(o.firstSecondSold)} units sold in the first second, ` +
    `the first order ${o.firstOrderMs === null ? '-' : `${n(o.firstOrderMs)} ms`} after the start; ${n(o.early)} orders before it; ` +
    `${n(o.notStarted)} answers SALE_NOT_STARTED over ${n(o.waves)} waves of buyers`
  );
}
