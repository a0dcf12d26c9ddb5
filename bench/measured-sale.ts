/**
 * A row's measured sale: the sale set up, one pass of the buyers metered, then judged
 * from Redis. What a kind of sale adds (a waiting room, a start, payments, retries,
 * settlement) is its scenario's, in bench/scenarios/: this file only calls their hooks.
 */
import { startSale } from '../harness/http';
import { BucketFigures, bucketKeys, mergedLog, unitsLeft } from './buckets';
import { startMeter } from './cost';
import type { Cost } from './cost';
import { emit } from './events';
import { checkHistory } from './history/check';
import { ClockReading, linkClocks, readClock } from './history/clock';
import type { History, HistoryReport } from './history/history';
import { logComplete } from './history/read-log';
import { Answer, LoadOptions, LoadResult, runLoad } from './load';
import type { Target } from './options';
import { LoadProgress, startProgress } from './progress';
import type { QueueFigures } from './queue-load';
import { redisClockSkewMs } from './redis-clock';
import { ProductRow, Row, SettlementRow } from './report';
import { pauseToWatch, requests, RowApp, Run, SERVERS, watchLine } from './rows';
import { buckets } from './scenarios/buckets';
import { pay } from './scenarios/pay';
import { judgeSale, measuredProducts } from './scenarios/products';
import { queue } from './scenarios/queue';
import { retries } from './scenarios/retries';
import type { Figures, Sale, Scenario } from './scenarios/scenario';
import { settle } from './scenarios/settle';
import { spread } from './scenarios/spread';
import { startsIn } from './scenarios/starts-in';
import type { Opening } from './starts-in';
import { soldOverTime, SoldPoint } from './timeline';
import { passes, peakOversold, ProductVerdict, readSale, SaleSnapshot, Verdict, withHistories } from './verdict';

/**
 * The kinds of sale, in the order their hooks run: the retries and the payments after
 * the pass before settlement is awaited; the payments' check, the opening's and the
 * waiting room's before settlement's.
 */
const KINDS: readonly ((sale: Sale) => Scenario | undefined)[] = [
  retries,
  pay,
  startsIn,
  queue,
  settle,
  spread,
  buckets,
];

/** Sales the `none` control gets to show an oversell before the bench calls itself blind. */
const CONTROL_ATTEMPTS = 3;

/** The comparison servers that keep no stock: their verdict is about their answers alone. */
const STORELESS: readonly Target[] = ['fastify-route', 'raw-http'];

/** The bare Fastify route keeps no stock: its verdict is about its answers alone, of a product sold out from the start. */
const NOTHING_STORED: SaleSnapshot = { initialStock: 0, perUserLimit: 1, stockLeft: 0, orders: [], buyers: {} };

/** What one row's measured sale gave. */
export interface Measured {
  readonly load: LoadResult;
  readonly verdict: Verdict;
  /** With --products N > 1: each product's own verdict (`verdict` is then the totals). */
  readonly products?: ProductVerdict[];
  /** Sales run (the `none` control may need more than one). */
  readonly attempts: number;
  /** --starts-in: how the sale opened. */
  readonly opening?: Opening;
  /** --queue: what the waiting room did. */
  readonly queue?: QueueFigures;
  /** Of the last sale's pass. */
  readonly cost: Cost;
  /** The last sale's units over time. */
  readonly soldOverTime: SoldPoint[];
  readonly settlement?: SettlementRow;
  /** --buckets: the measured product's buckets and their moves. */
  readonly buckets?: BucketFigures;
}

/**
 * The measured sale. The negative control's race window is one Redis round trip,
 * so how far it oversells varies from run to run. It is widest while the process is
 * cold: a warmed-up app served the 100,000-buyer burst fast enough that its sales were
 * often blind (on Node 24 with the compiled route, most of them), a cold one oversold
 * in each of four runs. So the control runs without a warm-up, and a sale that happens
 * to show nothing is run again on a fresh product in a fresh app, and the row says
 * so. Only CONTROL_ATTEMPTS blind sales in a row mean the bench cannot see it.
 */
export async function measuredSale(run: Run, t: RowApp): Promise<Measured> {
  const attempts = t.target === 'none' ? CONTROL_ATTEMPTS : 1;
  for (let attempt = 1; ; attempt++) {
    const measured = await oneSale(run, t, attempt);
    // Its peak, not its end: units come back (expiry), and an oversold sale can end whole.
    if (peakOversold({ ...measured.verdict, products: measured.products }) > 0 || attempt >= attempts) return measured;
    run.log(`${t.label}: sale ${attempt} did not oversell; running it again in a fresh app`);
    const exitCode = await t.app.stop();
    if (exitCode !== 0) run.log(`${t.label}: the app exited ${exitCode} on SIGTERM instead of 0`);
    t.app = await t.launch();
  }
}

async function oneSale(run: Run, t: RowApp, attempt: number): Promise<Measured> {
  const { options } = run;
  const ids = t.measuredProducts?.(attempt) ?? measuredProducts(options, attempt);
  const productId = ids[0];
  t.products.push(...ids);
  if (attempt > 1) watchLine(run, t, productId);
  // Redis's clock, which the sale's start and its orders are on.
  const skewMs = await redisClockSkewMs(run.client);
  const sale: Sale = { run, t, ids, productId, skewMs };
  const kinds = KINDS.flatMap((kind) => kind(sale) ?? []);
  const deadline = kinds.find((k) => k.paymentTimeoutMs !== undefined)?.paymentTimeoutMs;
  const put = Object.assign({}, ...kinds.map((k) => k.put ?? {})) as Record<string, unknown>;
  await Promise.all(ids.map((id) => startSale(t.app.url, t.token, id, options.stock, options.quantity, deadline, put)));
  await pauseToWatch(run, t);
  const progress: LoadProgress = { done: 0 };
  const bucketsOfIds = (await Promise.all(ids.map((id) => bucketKeys(run.client, t.keys, id)))).flat();
  // Units left over all the products and their buckets (reads of one bucket each: on a
  // cluster they sit in different slots), what is in flight between buckets included.
  const left = () => unitsLeft(run.client, bucketsOfIds);
  const onSale = options.stock * ids.length;
  emit({ type: 'sale', label: t.label, stock: onSale, requests: requests(options), attempt });
  const reporter = startProgress(t.label, requests(options), progress, async () => String(await left()), onSale);
  for (const k of kinds) k.begin?.();
  // The load's clock and Redis's on one line for the history: one reading before the pass, one after all the row sent.
  const clockAtStart = await readClock(run.client);
  // The cost is the pass's alone: after the sale's setup, before the retries and the verdict.
  const meter = await startMeter(run.meters, t.app.pid);
  const listeners = kinds.flatMap((k) => k.onAnswer ?? []);
  const userIds = kinds.find((k) => k.userIds)?.userIds;
  const loadOptions: LoadOptions = {
    url: t.app.url,
    productId,
    ...(ids.length > 1 && { productIds: ids }),
    buyers: options.buyers,
    duplicates: options.duplicates,
    connections: options.connections,
    quantity: options.quantity,
    idempotencyKeys: options.keys,
    // The sold-out path is bought through the URL, where the door answers it.
    productPath: options.soldOutPath,
    ...(t.tokens && { tokens: t.tokens }),
    ...(userIds && { userIds }),
    ...(listeners.length > 0 && { onAnswer: (a: Answer) => listeners.forEach((listen) => listen(a)) }),
  };
  const figures: Figures = {};
  // One kind at most fires the buyers its own way (options.ts refuses the combinations):
  // a second would be silently skipped, and its verdict never checked.
  const loaders = kinds.filter((k) => k.load);
  if (loaders.length > 1) throw new Error(`${loaders.length} kinds of sale each fire the buyers: one at most`);
  const pass = loaders[0];
  const first = await (pass ? pass.load!(loadOptions, progress, figures) : runLoad(loadOptions, progress)).finally(() =>
    reporter.stop(),
  );
  const cost = await meter.stop(first.sent, async () => onSale - (await left()));
  let load = first;
  for (const k of kinds) if (k.after) load = await k.after(load, figures);
  const clock = [clockAtStart, await readClock(run.client)];
  const { verdict, products, sold, firstSale } = await judged(run, t, ids, load, skewMs, clock, figures);
  for (const k of kinds) await k.judge?.(verdict, firstSale, figures);
  return {
    load,
    verdict,
    products,
    attempts: attempt,
    cost,
    soldOverTime: sold,
    settlement: figures.settlement,
    ...(figures.buckets && { buckets: figures.buckets }),
    ...(figures.opening && { opening: figures.opening }),
    ...(figures.queue && { queue: figures.queue }),
  };
}

/**
 * The sale read back from Redis and judged: the verdict, each product's, and the units
 * held over time; and each product's whole history (its log, the requests sent to it,
 * PostgreSQL's rows once settled) judged by the history checker.
 */
async function judged(
  run: Run,
  t: RowApp,
  ids: string[],
  load: LoadResult,
  skewMs: number,
  clock: ClockReading[],
  figures: Figures,
) {
  const read = (id: string) =>
    STORELESS.includes(t.target) ? Promise.resolve(NOTHING_STORED) : readSale(run.client, t.keys.product(id));
  // The load's start on Redis's clock, which the orders' times are on.
  const onRedisClock = <L extends { startedAt: number }>(l: L): L => ({ ...l, startedAt: l.startedAt + skewMs });
  const parts = await Promise.all(
    ids.map(async (id) => ({
      id,
      sale: await read(id),
      load: load.byProduct?.[id] && onRedisClock(load.byProduct[id]),
    })),
  );
  const judgedSale = judgeSale(parts, onRedisClock(load), run.options.quantity);
  // A server that keeps no stock has no log to judge.
  const { verdict, products } = STORELESS.includes(t.target)
    ? judgedSale
    : withHistories(
        judgedSale,
        await Promise.all(parts.map((p) => productHistory(run, t, p.id, p.sale, load, clock, figures.settled?.[p.id]))),
        load.startedAt + skewMs,
      );
  // All the products' orders on one clock against all their stock: the row's totals, drawn.
  const sold = soldOverTime(
    // Units given back (cancelled, expired) leave the line when they went back.
    parts.flatMap((p) => [...p.sale.orders, ...(p.sale.returns ?? []).map((r) => ({ ...r, quantity: -r.quantity }))]),
    load.startedAt + skewMs,
    parts.reduce((sum, p) => sum + p.sale.initialStock, 0),
  );
  return { verdict, products, sold, firstSale: parts[0].sale };
}

/**
 * One product's history judged: its order stream read as a log (a bucketed product's
 * streams merged on Redis's clock, every bucket's entries as one product's), every
 * request sent to it (each load's, retries and second waves included), the clocks'
 * link, and PostgreSQL's rows once settlement drained.
 */
async function productHistory(
  run: Run,
  t: RowApp,
  productId: string,
  sale: SaleSnapshot,
  load: LoadResult,
  clock: ClockReading[],
  settled: History['settled'],
): Promise<HistoryReport> {
  const buckets = await bucketKeys(run.client, t.keys, productId);
  const log = await mergedLog(run.client, buckets);
  // A load that kept no request (none today) leaves the client's checks not run, never passed on half a history.
  const requests = load.requests?.filter((r) => (r.productId ?? productId) === productId);
  return checkHistory({
    productId,
    stock: sale.initialStock,
    perUserLimit: sale.perUserLimit,
    log,
    logComplete: (await Promise.all(buckets.map((b) => logComplete(run.client, b.orders)))).every(Boolean),
    ...(requests && { requests, clock: linkClocks(...clock) }),
    ...(settled && { settled }),
  });
}

export function toRow(
  run: Run,
  t: RowApp,
  { load, verdict, products, attempts, cost, soldOverTime: sold, settlement, opening, queue, buckets }: Measured,
  exitCode: number | null,
): Row {
  const { options } = run;
  // A product passes as its row does: a safe strategy keeps its invariants, an unsafe one shows it breaks them.
  const productRows = products?.map((p): ProductRow => ({ ...p, pass: passes(p.invariants, t.unsafe) }));
  return {
    strategy: t.target,
    label: t.label,
    unsafe: t.unsafe,
    buyers: options.buyers,
    // Behind a waiting room a buyer sends a join, its reads and its purchase: every one counts.
    requests: queue ? load.sent : requests(options),
    connections: options.connections,
    // All of the row's products together (each has its own in `products`).
    stock: options.stock * options.products,
    quantity: options.quantity,
    workers: t.workers,
    telemetry: t.telemetry,
    ...(!SERVERS[t.target] && { settle: t.databaseUrl !== undefined }),
    ...(t.auth !== 'off' && { auth: t.auth }),
    durationMs: load.durationMs,
    throughput: Math.round((load.sent / load.durationMs) * 1000),
    latency: load.latency,
    latencyByPercentile: load.latencyCurve ?? [],
    soldOverTime: sold,
    status: load.status,
    codes: load.codes,
    errors: load.errors,
    timeouts: load.timeouts,
    ...verdict,
    attempts,
    cost,
    ...(productRows && { products: productRows }),
    ...(settlement && { settlement }),
    ...(opening && { opening }),
    ...(queue && { queue }),
    ...(t.catalog && { catalog: t.catalog }),
    ...(buckets && { buckets }),
    pass: passes(verdict.invariants, t.unsafe) && (t.unsafe || exitCode === 0),
  };
}
