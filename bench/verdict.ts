import type { Redis } from 'ioredis';
import type { ProductKeys } from '../src/redis/key-layout';
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
}

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
  const [[initialStock, perUserLimit], stock, buyers] = await Promise.all([
    redis.hmget(keys.meta, 'initialStock', 'perUserLimit'),
    redis.get(keys.stock),
    redis.hgetall(keys.buyers),
  ]);
  if (initialStock === null || perUserLimit === null || stock === null) {
    throw new Error(`no sale found under ${keys.meta}`);
  }
  const orders: OrderEntry[] = [];
  const returns: OrderEntry[] = [];
  for (let start = '-'; ;) {
    const page = await redis.xrange(keys.orders, start, '+', 'COUNT', PAGE);
    for (const [id, fields] of page) {
      const f: Record<string, string> = {};
      for (let i = 0; i < fields.length; i += 2) f[fields[i]] = fields[i + 1];
      // An order's own entry has no `event`; what became of it later does.
      const entry = {
        orderId: f.orderId,
        userId: f.userId,
        quantity: Number(f.quantity),
        ms: Number(id.split('-')[0]),
      };
      if (f.event === 'cancelled' || f.event === 'expired') returns.push(entry);
      if (f.event === undefined) orders.push(entry);
    }
    if (page.length < PAGE) break;
    start = `(${page[page.length - 1][0]}`;
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
  };
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
