import type { Redis } from 'ioredis';
import { KeyLayout, type ProductKeys } from '../src/redis/key-layout';
import { unitsInFlight } from './buckets';
import { historyLine } from './history/check';
import { CHECKS, CheckName, Finding, HistoryReport } from './history/history';
import { readLog } from './history/read-log';
import type { ProductLoad } from './load';

export interface OrderEntry {
  readonly orderId: string;
  readonly userId: string;
  readonly quantity: number;
  /** Redis server time of the XADD, from the stream entry id. */
  readonly ms: number;
}

/** What Redis itself says about a sale: the source of truth for the verdict. */
export interface SaleSnapshot {
  readonly initialStock: number;
  readonly perUserLimit: number;
  readonly stockLeft: number;
  readonly orders: OrderEntry[];
  /** The buyers hash: userId -> units. */
  readonly buyers: Record<string, number>;
  /**
   * Orders whose units went back to stock (cancelled or expired), by orderId, as the
   * order states hash says; empty in a sale nobody paid or cancelled in.
   */
  readonly returned?: ReadonlySet<string>;
  /** The stream's `cancelled` and `expired` entries (order-outcome-6.lua): each return, as many times as written, with its time. */
  readonly returns?: readonly OrderEntry[];
  /** Orders per status letter of the states hash (R reserved, P paid, C cancelled, E expired). */
  readonly statuses?: Readonly<Record<string, number>>;
  /** Escrow buckets the sale was read from, when more than one (src/sale/buckets.ts). */
  readonly buckets?: number;
}

export interface Invariants {
  noOversell: boolean;
  noUndersell: boolean;
  conservation: boolean;
  perUserLimit: boolean;
  accounting: boolean;
  exactlyOnce: boolean;
  /**
   * With settlement on (bench/settled.ts): after settlement drained, every order is in
   * PostgreSQL exactly once with the status Redis has, each event recorded once.
   */
  settled?: boolean;
  /** With --starts-in (bench/starts-in.ts): no order older than the sale's start, by Redis's clock. */
  window?: boolean;
  /** With --queue (bench/queue-load.ts): every order an admitted buyer's; passes outstanding within the stock left. */
  queue?: boolean;
  /**
   * The history checker (bench/history/): every check it could run on the product's
   * whole history (its log, every request and answer, PostgreSQL's rows once settled)
   * passed; one failed or not proven breaks it. Absent for a server that keeps no stock.
   */
  history?: boolean;
}

/** A product's history report as a verdict carries it: findings capped, and where the row's time axis starts. */
export interface HistoryVerdict extends HistoryReport {
  /** The load's first request on Redis's clock (ms): the 0 of the row's charts, which the report's instants are on. */
  readonly startMs: number;
  /** The checker's one line (historyLine), times from startMs: what the text report and the lab print. */
  readonly line: string;
}

/** Findings kept per check in a verdict (the JSON, the charts): enough to name them; `counts` has them all. */
export const FINDINGS_KEPT = 20;

export interface Verdict {
  readonly sold: number;
  readonly stockLeft: number;
  readonly orders: number;
  readonly distinctBuyers: number;
  readonly oversold: number;
  /** From the first request to the order that took the stock to 0; null if it never got there. */
  readonly sellOutMs: number | null;
  readonly salesPerSec: number | null;
  readonly invariants: Invariants;
  /** The history checker's report (with --products N > 1, each product has its own instead). */
  readonly history?: HistoryVerdict;
  /** For each broken invariant, what was seen (the fault suite keeps the ones its fault must not break). */
  readonly broken: Partial<Record<keyof Invariants, string>>;
  /** One line per broken invariant (and per other failure the caller adds), saying what was seen. */
  readonly problems: string[];
}

/** One product's verdict in a sale spread over several. */
export interface ProductVerdict extends Verdict {
  readonly id: string;
  /** Its initial stock. */
  readonly stock: number;
  /** Requests its buyers sent, and how they were answered. */
  readonly requests: number;
  readonly status: Record<string, number>;
}

const PAGE = 10_000;

/**
 * What Redis holds about one product's sale. Every read is of that product's keys,
 * one hash slot, so a Redis Cluster client serves it as a single server does.
 */
export async function readSale(
  redis: Pick<Redis, 'hmget' | 'get' | 'hgetall' | 'xrange'>,
  keys: ProductKeys,
): Promise<SaleSnapshot> {
  const main = await readBucket(redis, keys);
  if (main.bucketIds.length === 0) return main;
  // Escrow buckets (src/sale/buckets.ts): one sale over every bucket's log, the units in
  // flight between them counted as stock left (unsold, in no bucket yet).
  const layout = productLayoutOf(keys);
  const others = await Promise.all(main.bucketIds.map((id) => readBucket(redis, layout.product(id))));
  const all = [main, ...others];
  const inFlight = all.reduce((sum, b) => sum + b.inFlight, 0);
  const merged = mergeSales(all);
  const statuses: Record<string, number> = {};
  for (const b of all) for (const [k, n] of Object.entries(b.statuses ?? {})) statuses[k] = (statuses[k] ?? 0) + n;
  return {
    ...merged,
    perUserLimit: main.perUserLimit,
    stockLeft: merged.stockLeft + inFlight,
    returns: [...(merged.returns ?? [])].sort((a, b) => a.ms - b.ms),
    statuses,
    buckets: all.length,
  };
}

/** One bucket's sale (a product's own keys are its bucket 0): its snapshot, the other buckets' ids, its units in flight. */
async function readBucket(
  redis: Pick<Redis, 'hmget' | 'get' | 'hgetall' | 'xrange'>,
  keys: ProductKeys,
): Promise<SaleSnapshot & { bucketIds: string[]; inFlight: number }> {
  const [[initialStock, perUserLimit, others], stock, buyers, moves] = await Promise.all([
    redis.hmget(keys.meta, 'initialStock', 'perUserLimit', 'buckets'),
    redis.get(keys.stock),
    redis.hgetall(keys.buyers),
    redis.hgetall(keys.moves),
  ]);
  if (initialStock === null || perUserLimit === null || stock === null) {
    throw new Error(`no sale found under ${keys.meta}`);
  }
  const orders: OrderEntry[] = [];
  const returns: OrderEntry[] = [];
  // The stream read as the history checker reads it (bench/history/read-log.ts): one parser of an entry.
  for await (const { kind, orderId, userId, quantity, ms } of readLog(redis, keys.orders, PAGE)) {
    if (kind === 'order') orders.push({ orderId, userId, quantity, ms });
    else if (kind !== 'paid') returns.push({ orderId, userId, quantity, ms });
  }
  const states = await redis.hgetall(keys.states);
  const returned = new Set<string>();
  const statuses: Record<string, number> = {};
  for (const [orderId, state] of Object.entries(states)) {
    statuses[state[0]] = (statuses[state[0]] ?? 0) + 1;
    if (state[0] === 'C' || state[0] === 'E') returned.add(orderId);
  }
  return {
    initialStock: Number(initialStock),
    perUserLimit: Number(perUserLimit),
    stockLeft: Number(stock),
    orders,
    buyers: Object.fromEntries(Object.entries(buyers).map(([k, v]) => [k, Number(v)])),
    returned,
    returns,
    statuses,
    bucketIds: others ? others.split(' ') : [],
    inFlight: unitsInFlight(moves),
  };
}

/** The key layout a product's keys were built by (its prefix), for its other buckets' keys. */
export function productLayoutOf(keys: ProductKeys): KeyLayout {
  const at = keys.meta.indexOf('{p:');
  return new KeyLayout(keys.meta.slice(0, at));
}

/** Checks the invariants (docs/bench.md lists them) against what Redis holds and what the buyers were told. */
export function judge(sale: SaleSnapshot, load: ProductLoad, quantity: number): Verdict {
  const broken: Partial<Record<keyof Invariants, string>> = {};
  // Units held: those of every order, less those that went back to stock (cancelled, expired).
  const returned = sale.returned ?? new Set<string>();
  const held = sale.orders.filter((o) => !returned.has(o.orderId));
  const units = held.reduce((sum, o) => sum + o.quantity, 0);
  const unitsReturned = sale.orders.reduce((sum, o) => sum + (returned.has(o.orderId) ? o.quantity : 0), 0);
  // A retry with the same Idempotency-Key is answered the same order again: count orders, not 201s.
  const acknowledged = new Set(load.orderIds);
  const created = acknowledged.size;
  const perUser = new Map<string, number>();
  for (const o of held) perUser.set(o.userId, (perUser.get(o.userId) ?? 0) + o.quantity);

  const noOversell =
    units <= sale.initialStock && sale.stockLeft >= 0 && created * quantity - unitsReturned <= sale.initialStock;
  if (!noOversell) {
    broken.noOversell = `oversell: ${units} units held in orders and ${created} acknowledged (${unitsReturned} units returned) for a stock of ${sale.initialStock}; stock left ${sale.stockLeft}`;
  }

  const demand = load.distinctBuyers * Math.min(quantity, sale.perUserLimit);
  const noUndersell = demand < sale.initialStock || sale.stockLeft <= 0;
  if (!noUndersell)
    broken.noUndersell = `undersell: demand ${demand} >= stock ${sale.initialStock} but ${sale.stockLeft} left`;

  const streamIds = new Set(sale.orders.map((o) => o.orderId));
  const twiceInStream = sale.orders.length - streamIds.size;
  const missing = load.orderIds.filter((id) => !streamIds.has(id));
  // Each returned order returned exactly once: one `cancelled`/`expired` entry each, none for any other.
  const returns = sale.returns ?? [];
  const returnedOnce =
    returns.length === returned.size && new Set(returns.map((r) => r.orderId)).size === returns.length;
  const conservation =
    sale.initialStock === sale.stockLeft + units &&
    sale.orders.length === created &&
    missing.length === 0 &&
    returnedOnce;
  if (!conservation) {
    broken.conservation =
      `conservation: initial ${sale.initialStock} vs left ${sale.stockLeft} + held ${units}; ` +
      `${sale.orders.length} orders vs ${created} 201s; ${missing.length} acknowledged orderIds not in the stream; ` +
      `${returns.length} returns written for ${returned.size} orders returned`;
  }

  // No order written twice (a replayed write), none acknowledged and lost, none written unacknowledged.
  const exactlyOnce = twiceInStream === 0 && missing.length === 0 && sale.orders.length === created;
  if (!exactlyOnce) {
    broken.exactlyOnce =
      `exactly once: ${twiceInStream} orderIds twice in the stream; ${missing.length} acknowledged orders not in it; ` +
      `${sale.orders.length} orders in it for ${created} acknowledged`;
  }

  const overLimit = [...perUser.entries()].filter(([, n]) => n > sale.perUserLimit);
  const hashMismatch = [...perUser.entries()].filter(([user, n]) => sale.buyers[user] !== n).length;
  const onePerBuyer = sale.perUserLimit > quantity || perUser.size === held.length;
  const perUserLimit = overLimit.length === 0 && hashMismatch === 0 && onePerBuyer;
  if (!perUserLimit) {
    broken.perUserLimit =
      `per-user limit: ${overLimit.length} buyers above ${sale.perUserLimit}; ${hashMismatch} buyers whose ` +
      `count differs from their orders; ${perUser.size} distinct buyers for ${held.length} orders held`;
  }

  const answered = Object.values(load.status).reduce((a, b) => a + b, 0);
  const fiveXx = Object.entries(load.status)
    .filter(([s]) => s.startsWith('5'))
    .reduce((a, [, n]) => a + n, 0);
  const accounting = load.sent === answered && load.errors === 0 && load.timeouts === 0 && fiveXx === 0;
  if (!accounting) {
    broken.accounting = `accounting: ${load.sent} sent, ${answered} answered, ${load.errors} errors, ${load.timeouts} timeouts, ${fiveXx} 5xx`;
  }

  const sellOut = sellOutEntry(sale);
  const sellOutMs = sellOut ? Math.max(0, sellOut.ms - load.startedAt) : null;
  return {
    sold: sale.initialStock - sale.stockLeft,
    stockLeft: sale.stockLeft,
    orders: sale.orders.length,
    distinctBuyers: perUser.size,
    oversold: Math.max(0, units - sale.initialStock),
    sellOutMs,
    salesPerSec: sellOutMs === null ? null : Math.round((sale.initialStock / Math.max(sellOutMs, 1)) * 1000),
    invariants: { noOversell, noUndersell, conservation, perUserLimit, accounting, exactlyOnce },
    broken,
    problems: Object.values(broken),
  };
}

/**
 * Whether a result passes: a safe strategy keeps every invariant; an unsafe one (a
 * negative control) passes when it shows that it breaks one.
 */
export function passes(invariants: Invariants, unsafe: boolean): boolean {
  const allHold = Object.values(invariants).every(Boolean);
  return unsafe ? !allHold : allHold;
}

/**
 * A sale spread over several products (`--products N`): each product judged on its own
 * (its stock, its orders, its buyers' answers), and the whole. The whole's figures are
 * totals; one of its invariants holds only if it holds for the whole and for every
 * product (a product oversold and another undersold must not cancel out), and its
 * oversold is the sum of the products'. Problems name their product.
 */
export function judgeProducts(
  parts: readonly { readonly id: string; readonly sale: SaleSnapshot; readonly load: ProductLoad }[],
  load: ProductLoad,
  quantity: number,
): { total: Verdict; products: ProductVerdict[] } {
  const products = parts.map(({ id, sale, load: own }): ProductVerdict => ({
    id,
    stock: sale.initialStock,
    requests: own.sent,
    status: own.status,
    ...judge(sale, own, quantity),
  }));
  const whole = judge(mergeSales(parts.map((p) => p.sale)), load, quantity);
  const invariants = { ...whole.invariants };
  for (const name of Object.keys(invariants) as (keyof Invariants)[]) {
    invariants[name] &&= products.every((p) => p.invariants[name]);
  }
  const broken: Partial<Record<keyof Invariants, string>> = { ...whole.broken };
  for (const p of products) {
    for (const [name, seen] of Object.entries(p.broken) as [keyof Invariants, string][]) {
      broken[name] = [broken[name], `${p.id}: ${seen}`].filter(Boolean).join('; ');
    }
  }
  const total: Verdict = {
    ...whole,
    oversold: products.reduce((sum, p) => sum + p.oversold, 0),
    invariants,
    broken,
    problems: [...whole.problems, ...products.flatMap((p) => p.problems.map((line) => `${p.id}: ${line}`))],
  };
  return { total, products };
}

/**
 * The history checker's report into a verdict: its `history` invariant holds when every
 * check that ran passed (a check not proven does not), and a broken one says which
 * checks failed and their first finding. The end state's invariants stay as they are.
 */
export function withHistory<V extends Verdict>(verdict: V, report: HistoryReport, startMs: number): V {
  const history: HistoryVerdict = {
    ...report,
    findings: capFindings(report.findings),
    startMs,
    line: historyLine(report, startMs),
  };
  const invariants = { ...verdict.invariants, history: report.holds };
  if (report.holds) return { ...verdict, invariants, history };
  const line = historyProblem(report, startMs);
  return {
    ...verdict,
    invariants,
    history,
    broken: { ...verdict.broken, history: line },
    problems: [...verdict.problems, line],
  };
}

/**
 * Each product's history report into its verdict (bench/history/check.ts gives one per
 * product); a row of several products holds `history` when every product does, and
 * its problems name the product, as judgeProducts' do.
 */
export function withHistories(
  judged: { verdict: Verdict; products?: ProductVerdict[] },
  reports: readonly HistoryReport[],
  startMs: number,
): { verdict: Verdict; products?: ProductVerdict[] } {
  const reportOf = (id: string) => {
    const report = reports.find((r) => r.productId === id);
    if (!report) throw new Error(`no history report for product ${id}`);
    return report;
  };
  if (!judged.products) return { verdict: withHistory(judged.verdict, reports[0], startMs) };
  const products = judged.products.map((p) => withHistory(p, reportOf(p.id), startMs));
  const failed = products.filter((p) => !p.invariants.history);
  const { verdict } = judged;
  if (failed.length === 0)
    return { verdict: { ...verdict, invariants: { ...verdict.invariants, history: true } }, products };
  const lines = failed.map((p) => `${p.id}: ${p.broken.history}`);
  return {
    verdict: {
      ...verdict,
      invariants: { ...verdict.invariants, history: false },
      broken: { ...verdict.broken, history: lines.join('; ') },
      problems: [...verdict.problems, ...lines],
    },
    products,
  };
}

/** `history: oversell fail (3), falseRefusals not proven: why; first: ...`: what the checker held against the product. */
function historyProblem(report: HistoryReport, startMs: number): string {
  const against = checksAgainst(report);
  const first = CHECKS.map((c) => report.findings.find((f) => f.check === c)).filter((f): f is Finding => !!f);
  return (
    `history: ${against.join(', ')}` +
    (report.oversell
      ? `; peak ${report.peak.units} units held of ${report.stock} at ${report.peak.ms === null ? '-' : `${report.peak.ms - startMs} ms`}`
      : '') +
    (first.length > 0 ? `; first: ${first.map((f) => `${f.check}: ${f.detail}`).join('; ')}` : '') +
    (report.notProven.length > 0 ? `; not proven: ${report.notProven.join('; ')}` : '')
  );
}

/** `oversell failed (3)`, `falseRefusals not proven`: each check that does not hold, in the issue's order. */
export function checksAgainst(report: Pick<HistoryReport, 'checks' | 'counts'>): string[] {
  return CHECKS.filter((c) => report.checks[c] === 'fail' || report.checks[c] === 'not proven').map((c) =>
    report.checks[c] === 'fail' ? `${c} failed (${report.counts[c].toLocaleString('en-US')})` : `${c} not proven`,
  );
}

/** The first FINDINGS_KEPT findings of each check, in the checker's order. */
function capFindings(findings: readonly Finding[]): Finding[] {
  const kept = new Map<CheckName, number>();
  return findings.filter((f) => {
    const k = (kept.get(f.check) ?? 0) + 1;
    kept.set(f.check, k);
    return k <= FINDINGS_KEPT;
  });
}

/**
 * The units held above the stock at the worst instant of the sale, by the history
 * checker (a row of several products: their peaks summed). Units come back (cancel,
 * expiry), so the end state can show a fraction of an oversell, or none: the end's
 * figure counts only where no history was read, or where it says more (a log whose
 * head was trimmed).
 */
export function peakOversold(v: Pick<Verdict, 'oversold' | 'history'> & { products?: readonly Verdict[] }): number {
  if (v.products?.some((p) => p.history)) {
    return Math.max(
      v.oversold,
      v.products.reduce((sum, p) => sum + Math.max(p.oversold, p.history?.oversell?.units ?? 0), 0),
    );
  }
  return Math.max(v.oversold, v.history?.oversell?.units ?? 0);
}

/** Several products' sales as one: stock and orders summed, orders in time order (the whole sells out with its last unit). */
function mergeSales(sales: readonly SaleSnapshot[]): SaleSnapshot {
  return {
    initialStock: sales.reduce((sum, s) => sum + s.initialStock, 0),
    perUserLimit: Math.max(...sales.map((s) => s.perUserLimit)),
    stockLeft: sales.reduce((sum, s) => sum + s.stockLeft, 0),
    orders: sales.flatMap((s) => s.orders).sort((a, b) => a.ms - b.ms),
    // Each buyer buys one product: their entries never collide.
    buyers: Object.assign({}, ...sales.map((s) => s.buyers)) as Record<string, number>,
    returned: new Set(sales.flatMap((s) => [...(s.returned ?? [])])),
    returns: sales.flatMap((s) => s.returns ?? []),
  };
}

/** The order after which the units sold reached the initial stock. */
function sellOutEntry(sale: SaleSnapshot): OrderEntry | null {
  let units = 0;
  for (const o of sale.orders) {
    units += o.quantity;
    if (units >= sale.initialStock) return o;
  }
  return null;
}
