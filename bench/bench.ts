/**
 * The flash-sale bench: fires N distinct buyers at the real service, one fresh app
 * (or cluster of apps) per strategy, then reads the verdict from Redis itself.
 *
 *   npm run bench -- --buyers 100000 --connections 1000 --stock 1000 --strategy lock,none
 *
 * Exit code 1 when a safe strategy breaks an invariant, or when the `none` control
 * fails to oversell (a bench that cannot see overselling proves nothing).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startSale } from '../harness/http';
import { retryFailed } from './retries';
import { BASELINE_MAIN, FASTIFY_ROUTE_MAIN, RAW_HTTP_MAIN, ROOT } from '../harness/paths';
import { RunningApp, startApp, stopAll, track } from '../harness/processes';
import { PrivatePostgres, quiesce, startPrivatePostgres } from '../harness/postgres';
import { REDLOCK_NODE, startPrivateRedis } from '../harness/redis';
import { Afterlife, PAYMENT_SECRET, payAll } from './afterlife';
import { checkSettled, unsettled, waitForSettlement } from './settled';
import { loadUntilOpen, Opening, openingOf } from './starts-in';
import { loadThroughQueue, QueueFigures, queueVerdict } from './queue-load';
import { UNSAFE_STRATEGIES } from '../src/config/app-config';
import { KeyLayout } from '../src/redis/key-layout';
import { Cost, MeteredNode, startMeter } from './cost';
import { Answer, LoadOptions, LoadResult, runLoad } from './load';
import { BenchAuth, BenchOptions, parseOptions, Target, USAGE, UsageError } from './options';
import { mintBuyerTokens, tokenCount } from './buyer-tokens';
import { emit } from './events';
import { LoadProgress, startProgress } from './progress';
import { chartJsSource, htmlReport, htmlPathFor } from './html-report';
import { formatReport, ProductRow, Row, rowLabel, SettlementRow } from './report';
import { BenchClient, connect, RunRedis, startRunRedis } from './run-redis';
import { textChart } from './text-chart';
import { redisClockSkewMs } from './redis-clock';
import { soldOverTime, SoldPoint } from './timeline';
import { judge, judgeProducts, passes, ProductVerdict, readSale, SaleSnapshot, Verdict } from './verdict';

const n = (x: number) => x.toLocaleString('en-US');

/** Rows given a database so far (each its own). */
let rowsStarted = 0;

/** Sales the `none` control gets to show an oversell before the bench calls itself blind. */
const CONTROL_ATTEMPTS = 3;

/** The comparison servers' entry points; every other target is a strategy of the app. */
const SERVERS: Partial<Record<Target, string>> = {
  baseline: BASELINE_MAIN,
  'fastify-route': FASTIFY_ROUTE_MAIN,
  'raw-http': RAW_HTTP_MAIN,
};

/** The comparison servers that keep no stock: their verdict is about their answers alone. */
const STORELESS: readonly Target[] = ['fastify-route', 'raw-http'];

/** The bare Fastify route keeps no stock: its verdict is about its answers alone, of a product sold out from the start. */
const NOTHING_STORED: SaleSnapshot = { initialStock: 0, perUserLimit: 1, stockLeft: 0, orders: [], buyers: {} };

/** --watch: long enough to open the printed address, short enough not to bore. */
const WATCH_SECONDS = 5;

/** What every row of one bench run shares. */
interface Run {
  readonly options: BenchOptions;
  /** Where the sales are kept: one server or a cluster's masters. */
  readonly redis: RunRedis;
  /** Redlock's lock nodes, when a redlock row runs. */
  readonly redlockUrls: string;
  /** For the sales' setup reads and the verdict, read from Redis itself. */
  readonly client: BenchClient;
  /** A connection to each node of `redis`, for the cost's INFO samples. */
  readonly meters: MeteredNode[];
  /** Keeps this run's keys apart from any other's in a Redis the user named. */
  readonly runId: string;
  readonly log: (line: string) => void;
  /** --settle on: the private PostgreSQL each row's app settles into (a database per row). */
  readonly postgres?: PrivatePostgres;
}

/** One row's app, and what it wrote. */
interface RowApp {
  readonly target: Target;
  readonly workers: number;
  /** False: the app runs with TELEMETRY=0. */
  readonly telemetry: boolean;
  readonly label: string;
  readonly unsafe: boolean;
  /** The app now serving the row: the control gets a fresh one for each of its sales. */
  app: RunningApp;
  readonly token: string;
  readonly keys: KeyLayout;
  /** Starts the row's app again, fresh: the same settings, a new process. */
  readonly launch: () => Promise<RunningApp>;
  /** Products this row set up, for the clean-up of a Redis the user named. */
  readonly products: string[];
  /** The row's own PostgreSQL database, with settlement on. */
  readonly databaseUrl?: string;
  /** --auth: the buyer tokens the app verifies (off: none), and each buyer's token. */
  readonly auth: BenchAuth;
  readonly tokens?: ReadonlyMap<string, string>;
  /** --queue: the sale's waiting room admits this many buyers a second (0: no waiting room). */
  readonly queue: number;
}

async function main(): Promise<number> {
  const run = await prepare(parseOptions(process.argv.slice(2)));
  const { options } = run;
  const rows: Row[] = [];
  // The comparison servers have no telemetry to switch off: they run once.
  // The comparison servers check no tokens either.
  type RunSpec = [Target, number, boolean, boolean, BenchAuth, number];
  const runs: RunSpec[] = [
    ...(options.baseline ? [['baseline', 1, true, false, 'off', 0] as RunSpec] : []),
    ...(options.soldOutPath
      ? (['raw-http', 'fastify-route'] as const).map((s): RunSpec => [s, 1, true, false, 'off', 0])
      : []),
    ...options.strategies.flatMap((s) =>
      options.workers.flatMap((w) =>
        options.telemetry.flatMap((on) =>
          options.settle.flatMap((settle) =>
            options.auth.flatMap((auth) => options.queue.map((queue): RunSpec => [s, w, on, settle, auth, queue])),
          ),
        ),
      ),
    ),
  ];
  for (const [target, workers, telemetry, settle, auth, queue] of runs) {
    rows.push(await runRow(run, target, workers, telemetry, settle, auth, queue));
  }
  const compared = withRatios(rows);
  for (const line of queueComparisons(compared)) run.log(line);
  const { machine, html } = await writeResults(run, compared);
  const { text, failed } = formatReport(compared);
  process.stdout.write(`${text}\n`);
  run.log(`results: ${relative(process.cwd(), options.out)}, charts: ${relative(process.cwd(), html)}`);
  // Figures mean little without what ran them: the Node of the app and the bench alike.
  run.log(`ran on Node ${machine.node}, Redis ${machine.redis}, ${machine.cpus} × ${machine.cpuModel}`);
  // Last, so a terminal's final screen shows the sale itself: the stock line, and who crossed it.
  process.stdout.write(`\n${textChart(compared)}\n`);
  return failed ? 1 : 0;
}

/** The Redis servers (unless --redis names one) and the verdict's client. */
async function prepare(options: BenchOptions): Promise<Run> {
  const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);
  const redis = await startRunRedis(options, log);
  // Redlock's lock nodes: three more private servers, whatever --redis says.
  let redlockUrls = '';
  if (options.strategies.includes('redlock')) {
    // Configured as `npm start` runs them, so the row measures what users get.
    redlockUrls = (await Promise.all([1, 2, 3].map(() => startPrivateRedis(REDLOCK_NODE)))).map((n) => n.url).join(',');
    log(`Redlock lock nodes at ${redlockUrls} (AOF, appendfsync always)`);
  }
  const { client, meters, close } = connect(redis);
  // Its clients, then what was started for the run (stopping a server twice is harmless).
  track({ stop: () => close().then(() => redis.stop()) });
  let postgres: PrivatePostgres | undefined;
  if (options.settle.includes(true)) {
    postgres = await startPrivatePostgres();
    log(`PostgreSQL at ${postgres.url}: each row settles into a database of its own (--settle off: none)`);
  }
  return {
    options,
    redis,
    redlockUrls,
    client,
    meters,
    runId: Date.now().toString(36),
    log,
    ...(postgres && { postgres }),
  };
}

/** One row: a fresh app for the target, warmed up, one measured sale (or up to three for the control), judged. */
async function runRow(
  run: Run,
  target: Target,
  workers: number,
  telemetry: boolean,
  settle: boolean,
  auth: BenchAuth,
  queue: number,
): Promise<Row> {
  const t = await startTarget(run, target, workers, telemetry, settle, auth, queue);
  try {
    // The control is not measured for speed: it runs cold (see measuredSale).
    if (target !== 'none') await warmUp(run, t);
    const measured = await measuredSale(run, t);
    const exitCode = await t.app.stop();
    if (exitCode !== 0) measured.verdict.problems.push(`the app exited ${exitCode} on SIGTERM instead of 0`);
    return toRow(run, t, measured, exitCode);
  } finally {
    await t.app.stop();
    await cleanUp(run, t);
  }
}

async function startTarget(
  run: Run,
  target: Target,
  workers: number,
  telemetry: boolean,
  settle: boolean,
  auth: BenchAuth,
  queue: number,
): Promise<RowApp> {
  const unsafe = (UNSAFE_STRATEGIES as readonly string[]).includes(target);
  const prefix = `bench:${run.runId}:${target}:x${workers}${telemetry ? '' : ':t0'}${settle ? '' : ':s0'}${
    auth === 'off' ? '' : `:a-${auth}`
  }${queue ? `:q${queue}` : ''}:`;
  // The comparison servers settle nothing: their label says nothing of it.
  const label = rowLabel({
    strategy: target,
    workers,
    telemetry,
    ...(!SERVERS[target] && { settle }),
    ...(auth !== 'off' && { auth }),
    ...(queue > 0 && { queue: { admitPerSecond: queue } }),
  });
  // Minted here, before the warm-up and the measured pass: the bench's CPU, not the app's.
  const buyerTokens = auth === 'off' ? undefined : await mintBuyerTokens(auth, tokenCount(run.options));
  const token = randomBytes(18).toString('base64url');
  // The comparison servers settle nothing.
  const databaseUrl =
    settle && run.postgres && !SERVERS[target]
      ? await run.postgres.createDatabase(`bench_${run.runId}_${++rowsStarted}`)
      : undefined;
  const launch = () =>
    startApp({
      workers,
      main: SERVERS[target],
      env: {
        ...run.redis.appEnv,
        ...(target === 'redlock' ? { REDLOCK_URLS: run.redlockUrls } : {}),
        ADMIN_TOKEN: token,
        PAYMENT_WEBHOOK_SECRET: PAYMENT_SECRET,
        ...(databaseUrl && { DATABASE_URL: databaseUrl }),
        LOCK_STRATEGY: target,
        ALLOW_UNSAFE: unsafe ? '1' : '0',
        KEY_PREFIX: prefix,
        // Telemetry on is what `npm start` runs: metrics, the dashboard's aggregate and the
        // default log level; off is none of them, so the ratio prices all three. Said either
        // way, so a TELEMETRY or LOG_LEVEL in the bench's own environment cannot decide it.
        LOG_LEVEL: telemetry ? 'log' : 'error',
        TELEMETRY: telemetry ? '1' : '0',
        ...buyerTokens?.env,
      },
    });
  const app = await launch();
  run.log(
    `${label}: app up (${workers} worker${workers > 1 ? 's' : ''}) at ${app.url}${unsafe ? ' — UNSAFE on purpose' : ''}`,
  );
  const t: RowApp = {
    target,
    workers,
    telemetry,
    label,
    unsafe,
    app,
    token,
    keys: new KeyLayout(prefix),
    products: [],
    launch,
    auth,
    queue,
    ...(buyerTokens && { tokens: buyerTokens.tokens }),
    ...(databaseUrl && { databaseUrl }),
  };
  watchLine(run, t, measuredProducts(run.options, 1)[0]);
  return t;
}

/** Where the app's dashboard shows the measured sale as it happens (a comparison server has none). */
function watchLine(run: Run, t: RowApp, productId: string): void {
  if (SERVERS[t.target]) return;
  run.log(`${t.label}: watch it live: ${t.app.url}/?product=${encodeURIComponent(productId)}`);
}

/**
 * --watch, for a learner at a terminal: time to open the page before the burst. Never
 * in CI or a pipe (a test's output is not a terminal), where it would only slow the run.
 */
async function pauseToWatch(run: Run, t: RowApp): Promise<void> {
  if (!run.options.watch || !process.stdin.isTTY || !process.stderr.isTTY || SERVERS[t.target]) return;
  run.log(`${t.label}: the sale starts in ${WATCH_SECONDS} s: open the address above to watch it (--watch)`);
  await sleep(WATCH_SECONDS * 1000);
}

/** The products the measured sale's `attempt` sells: `hot` (or p1..pN), `hot-2` (p1-2..) for the control's second, ... */
function measuredProducts(options: BenchOptions, attempt: number): string[] {
  return productIds(options, attempt === 1 ? 'hot' : `hot-${attempt}`, (i) =>
    attempt === 1 ? `p${i}` : `p${i}-${attempt}`,
  );
}

/**
 * The same shape as the measured sale, smaller: the same connections, and stock in
 * the same proportion, so both the buying and the sold-out paths are compiled hot
 * (and every connection is open) before the clock starts.
 */
async function warmUp(run: Run, t: RowApp): Promise<void> {
  const { options } = run;
  if (options.warmup === 0) return;
  // Per product: each of N warm-up products gets 1/N of the requests, as each measured one does.
  const warmStock = Math.max(1, Math.round((options.warmup * options.stock) / requests(options)));
  const ids = productIds(options, 'warmup', (i) => `warmup-${i}`);
  t.products.push(...ids);
  await Promise.all(
    ids.map((id) => startSale(t.app.url, t.token, id, warmStock, options.quantity, undefined, queued(t))),
  );
  const warm: LoadOptions = {
    url: t.app.url,
    productId: ids[0],
    ...(ids.length > 1 && { productIds: ids }),
    buyers: options.warmup,
    duplicates: 0,
    connections: options.connections,
    quantity: options.quantity,
    productPath: options.soldOutPath,
    ...(t.tokens && { tokens: t.tokens }),
  };
  // Behind a waiting room, the warm-up goes the buyers' way: join, read, buy with the pass.
  await (t.queue ? loadThroughQueue(warm, t.queue) : runLoad(warm));
}

/** --queue: the PUT's waiting room for a row that has one. */
function queued(t: RowApp): Record<string, unknown> {
  return t.queue ? { queue: { admitPerSecond: t.queue } } : {};
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
async function measuredSale(run: Run, t: RowApp): Promise<Measured> {
  const { options } = run;
  const attempts = t.target === 'none' ? CONTROL_ATTEMPTS : 1;
  for (let attempt = 1; ; attempt++) {
    const ids = measuredProducts(options, attempt);
    const productId = ids[0];
    t.products.push(...ids);
    if (attempt > 1) watchLine(run, t, productId);
    const deadline = options.pay !== undefined ? options.paymentTimeoutMs : undefined;
    // --starts-in: the sale opens that long from now by Redis's clock (the one it is judged by).
    const skewMs = await redisClockSkewMs(run.client);
    const startsAt = options.startsInMs !== undefined ? Math.ceil(Date.now() + skewMs + options.startsInMs) : undefined;
    const window = startsAt !== undefined ? { startsAt: new Date(startsAt).toISOString() } : {};
    await Promise.all(
      ids.map((id) =>
        startSale(t.app.url, t.token, id, options.stock, options.quantity, deadline, { ...window, ...queued(t) }),
      ),
    );
    await pauseToWatch(run, t);
    const progress: LoadProgress = { done: 0 };
    const stockKeys = ids.map((id) => t.keys.product(id).stock);
    // Units left over all the products (one GET each: on a cluster they sit in different slots).
    const left = async () =>
      (await Promise.all(stockKeys.map((key) => run.client.get(key)))).reduce((sum, v) => sum + Number(v ?? 0), 0);
    const onSale = options.stock * ids.length;
    emit({ type: 'sale', label: t.label, stock: onSale, requests: requests(options), attempt });
    const reporter = startProgress(t.label, requests(options), progress, async () => String(await left()), onSale);
    const answers: Answer[] = [];
    const paying = options.pay !== undefined ? new Afterlife(t.app.url, options.pay) : undefined;
    const lag = t.databaseUrl ? sampleLag(run, t, productId) : undefined;
    // The cost is the pass's alone: after the sale's setup, before the retries and the verdict.
    const meter = await startMeter(run.meters, t.app.pid);
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
      ...(options.retries > 0 ? { onAnswer: (a: Answer) => answers.push(a) } : {}),
      // --pay: each order is paid, cancelled or left as its 201 arrives.
      ...(paying ? { onAnswer: (a: Answer) => a.orderId && a.status === 201 && paying.offer(a.orderId) } : {}),
    };
    let waves: { waves: number; notStarted: number } | undefined;
    let queue: QueueFigures | undefined;
    const first = await (
      t.queue
        ? loadThroughQueue(loadOptions, t.queue, progress).then((r) => {
            queue = r.queue;
            return r.load;
          })
        : startsAt === undefined
          ? runLoad(loadOptions, progress)
          : loadUntilOpen(loadOptions, startsAt, async () => Date.now() + skewMs, progress).then((r) => {
              waves = r;
              return r.load;
            })
    ).finally(() => reporter.stop());
    const cost = await meter.stop(first.sent, async () => onSale - (await left()));
    let load = first;
    if (options.retries > 0) {
      const retried = await retryFailed(t.app.url, productId, options.quantity, answers, options.retries, first);
      load = retried.load;
      const { buyers, sent, outcomes, replayed } = retried.summary;
      run.log(
        `${t.label}: --retries ${options.retries}: ${buyers} buyers told 503 retried with their key (${sent} requests): ` +
          `${
            Object.entries(outcomes)
              .map(([code, n]) => `${code} ×${n}`)
              .join(', ') || 'none'
          }; ${replayed} answered an order placed earlier`,
      );
    }
    let afterlife: SettlementRow['afterlife'];
    if (paying) ({ load, afterlife } = await payAndResell(run, t, productId, load, paying));
    const settlement = t.databaseUrl ? await settled(run, t, productId, lag!, afterlife) : undefined;
    const sale = (id: string) =>
      STORELESS.includes(t.target) ? Promise.resolve(NOTHING_STORED) : readSale(run.client, t.keys.product(id));
    let verdict: Verdict;
    let products: ProductVerdict[] | undefined;
    // The load's start on Redis's clock, which the orders' times are on.
    const onRedisClock = <L extends { startedAt: number }>(l: L): L => ({ ...l, startedAt: l.startedAt + skewMs });
    const parts = await Promise.all(
      ids.map(async (id) => ({
        id,
        sale: await sale(id),
        load: load.byProduct?.[id] && onRedisClock(load.byProduct[id]),
      })),
    );
    if (ids.length === 1) {
      verdict = judge(parts[0].sale, onRedisClock(load), options.quantity);
    } else {
      ({ total: verdict, products } = judgeProducts(
        parts.map((p) => ({ ...p, load: p.load! })),
        onRedisClock(load),
        options.quantity,
      ));
    }
    // All the products' orders on one clock against all their stock: the row's totals, drawn.
    const sold = soldOverTime(
      // Units given back (cancelled, expired) leave the line when they went back.
      parts.flatMap((p) => [...p.sale.orders, ...(p.sale.returns ?? []).map((r) => ({ ...r, quantity: -r.quantity }))]),
      load.startedAt + skewMs,
      parts.reduce((sum, p) => sum + p.sale.initialStock, 0),
    );
    if (afterlife) {
      // A payment or a cancel may lose to the deadline or to each other (a 409 saying which);
      // anything else (a 5xx, a socket error) is an answer the afterlife should not get.
      const unexpected = [afterlife.refused, afterlife.secondWave.refused]
        .flatMap((r) => Object.entries(r))
        .filter(([code]) => !['ORDER_EXPIRED', 'ORDER_PAID', 'ORDER_CANCELLED'].includes(code));
      if (unexpected.length > 0) {
        verdict.invariants.accounting = false;
        const seen = unexpected.map(([code, k]) => `${code} ×${k}`).join(', ');
        verdict.broken.accounting = [verdict.broken.accounting, `payments and cancels answered ${seen}`]
          .filter(Boolean)
          .join('; ');
        verdict.problems.push(`payments and cancels answered ${seen}`);
      }
    }
    let opening: Opening | undefined;
    if (startsAt !== undefined && waves) {
      // The window's promise, read from Redis: no order older than the start.
      opening = openingOf(startsAt, parts[0].sale.orders, waves.waves, waves.notStarted);
      verdict.invariants.window = opening.early === 0;
      if (opening.early > 0) {
        verdict.broken.window = `window: ${opening.early} orders written before the start`;
        verdict.problems.push(verdict.broken.window);
      }
      run.log(
        `${t.label}: opened at ${new Date(startsAt).toISOString()} (Redis's clock): ${waves.notStarted} answers SALE_NOT_STARTED over ${waves.waves} waves; ` +
          `the first order ${opening.firstOrderMs} ms after the start, ${opening.firstSecondSold} units sold in the first second, none before the start` +
          (opening.early > 0 ? ` — EXCEPT ${opening.early}` : ''),
      );
    }
    if (queue) {
      // The waiting room's promise, read from Redis: every order an admitted buyer's.
      const broken = await queueVerdict(
        run.client,
        t.keys.product(productId),
        parts[0].sale.orders,
        parts[0].sale.perUserLimit,
      );
      verdict.invariants.queue = broken === null;
      if (broken) {
        verdict.broken.queue = broken;
        verdict.problems.push(broken);
      }
      run.log(
        `${t.label}: through the waiting room at ${n(queue.admitPerSecond)}/s: ${n(queue.joins)} joins, ${n(queue.reads)} ticket reads, ` +
          `${n(queue.purchases)} purchases; ${n(queue.admitted)} buyers admitted, ${n(queue.turnedAway)} told sold out` +
          (broken ? ` — ${broken}` : ", every order an admitted buyer's"),
      );
    }
    if (settlement) {
      verdict.invariants.settled = settlement.ok;
      if (!settlement.ok) {
        verdict.broken.settled = settlement.problem;
        verdict.problems.push(settlement.problem!);
      }
    }
    if (verdict.oversold > 0 || attempt >= attempts) {
      return {
        load,
        verdict,
        products,
        attempts: attempt,
        cost,
        soldOverTime: sold,
        settlement: settlement?.row,
        ...(opening && { opening }),
        ...(queue && { queue }),
      };
    }
    run.log(`${t.label}: sale ${attempt} did not oversell; running it again in a fresh app`);
    const exitCode = await t.app.stop();
    if (exitCode !== 0) run.log(`${t.label}: the app exited ${exitCode} on SIGTERM instead of 0`);
    t.app = await t.launch();
  }
}

/** What one row's measured sale gave. */
interface Measured {
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
}

function toRow(
  run: Run,
  t: RowApp,
  { load, verdict, products, attempts, cost, soldOverTime: sold, settlement, opening, queue }: Measured,
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
    pass: passes(verdict.invariants, t.unsafe) && (t.unsafe || exitCode === 0),
  };
}

/** Samples the measured product's unsettled entries every 200 ms until stopped: the report's lag line. */
function sampleLag(run: Run, t: RowApp, productId: string): { points: SettlementRow['lag']; stop(): void } {
  const k = t.keys.product(productId);
  const start = Date.now();
  const points: SettlementRow['lag'] = [];
  const timer = setInterval(() => {
    void unsettled(run.client, k).then(
      (n) => points.push({ ms: Date.now() - start, unsettled: n }),
      () => undefined,
    );
  }, 200);
  return { points, stop: () => clearInterval(timer) };
}

/**
 * --pay, after the load: waits for the payments and cancels sent as the 201s arrived
 * (bench/afterlife.ts), then until the orders left unpaid expired at their deadline
 * (the sweeper, by Redis's clock), then sends a second wave of new buyers, twice the
 * units back in stock, who buy them and pay at once. The load the verdict judges is
 * both waves together.
 */
async function payAndResell(
  run: Run,
  t: RowApp,
  productId: string,
  load: LoadResult,
  paying: Afterlife,
): Promise<{ load: LoadResult; afterlife: SettlementRow['afterlife'] }> {
  const { options } = run;
  const k = t.keys.product(productId);
  const outcome = await paying.done();
  const waitUntil = Date.now() + options.paymentTimeoutMs + 15_000;
  while ((await run.client.zcard(k.deadlines)) > 0) {
    if (Date.now() > waitUntil)
      throw new Error(
        `${t.label}: reservations still unexpired ${options.paymentTimeoutMs + 15_000} ms after the sale`,
      );
    await sleep(100);
  }
  const stockLeft = Number(await run.client.get(k.stock));
  run.log(
    `${t.label}: --pay ${options.pay}: ${outcome.paid} paid, ${outcome.cancelled} cancelled, ${outcome.leftToExpire} left to expire` +
      `${Object.keys(outcome.refused).length ? `, refused ${JSON.stringify(outcome.refused)}` : ''}; ${stockLeft} units back in stock`,
  );
  let second: LoadResult | undefined;
  let secondRefused: Record<string, number> = {};
  if (stockLeft > 0) {
    second = await runLoad({
      url: t.app.url,
      productId,
      buyers: stockLeft * 2,
      duplicates: 0,
      connections: Math.min(options.connections, 50),
      quantity: options.quantity,
      userPrefix: 'w2-',
    });
    secondRefused = await payAll(t.app.url, [...new Set(second.orderIds)]);
    run.log(
      `${t.label}: second wave: ${stockLeft * 2} buyers bought ${second.orderIds.length} orders of the returned units and paid`,
    );
  }
  return {
    load: second ? mergeLoads(load, second) : load,
    afterlife: {
      ...outcome,
      unitsReturned: stockLeft,
      secondWave: { buyers: second ? stockLeft * 2 : 0, created: second?.orderIds.length ?? 0, refused: secondRefused },
    },
  };
}

/** Two loads on one product as one, for the verdict: every request, answer and order of both. */
function mergeLoads(a: LoadResult, b: LoadResult): LoadResult {
  const add = (x: Record<string, number>, y: Record<string, number>) => {
    const sum = { ...x };
    for (const [key, n] of Object.entries(y)) sum[key] = (sum[key] ?? 0) + n;
    return sum;
  };
  return {
    ...a,
    sent: a.sent + b.sent,
    status: add(a.status, b.status),
    codes: add(a.codes, b.codes),
    errors: a.errors + b.errors,
    timeouts: a.timeouts + b.timeouts,
    orderIds: [...a.orderIds, ...b.orderIds],
    distinctBuyers: a.distinctBuyers + b.distinctBuyers,
  };
}

/**
 * Waits for settlement to catch up with the product's stream, then checks PostgreSQL
 * against Redis (bench/settled.ts). The drain is timed from the end of the last load.
 */
async function settled(
  run: Run,
  t: RowApp,
  productId: string,
  lag: { points: SettlementRow['lag']; stop(): void },
  afterlife: SettlementRow['afterlife'],
): Promise<{ ok: boolean; problem?: string; row: SettlementRow }> {
  const k = t.keys.product(productId);
  const drainMs = await waitForSettlement(run.client, k, 60_000);
  lag.stop();
  if (drainMs === null) {
    const problem = `settled: settlement had not caught up 60 s after the sale (${await unsettled(run.client, k)} entries unsettled)`;
    return {
      ok: false,
      problem,
      row: { drainMs, rows: 0, byStatus: {}, lag: lag.points, ...(afterlife && { afterlife }) },
    };
  }
  const check = await checkSettled(t.databaseUrl!, run.client, k, productId);
  run.log(
    `${t.label}: settled into PostgreSQL ${drainMs} ms after the last answer: ${check.rows} orders (${Object.entries(
      check.byStatus,
    )
      .map(([s, n]) => `${s} ${n}`)
      .join(', ')})${check.ok ? ', each once, as Redis has them' : `; ${check.problem}`}`,
  );
  return {
    ok: check.ok,
    ...(check.problem && { problem: check.problem }),
    row: { drainMs, rows: check.rows, byStatus: check.byStatus, lag: lag.points, ...(afterlife && { afterlife }) },
  };
}

/** After a row: its settling database made quiet for the next row, and, in a Redis the user named, what this row wrote removed (only that). */
async function cleanUp(run: Run, t: RowApp): Promise<void> {
  // A settling row's writes are flushed and vacuumed before the next row starts (a
  // failure here is only said: the row's verdict is in, and cleaning up goes on).
  if (t.databaseUrl) {
    await quiesce(t.databaseUrl).catch((err: Error) => run.log(`${t.label}: PostgreSQL not quiesced: ${err.message}`));
  }
  if (!run.options.redis) return;
  // One DEL per product: its keys share a slot, different products' may not.
  for (const id of t.products) await run.client.del(...Object.values(t.keys.product(id)));
}

/** The JSON results, and the HTML report beside them; the machine they ran on and the HTML's path. */
async function writeResults(
  run: Run,
  rows: Row[],
): Promise<{ machine: { cpus: number; cpuModel: string; node: string; redis: string }; html: string }> {
  const { options } = run;
  const redisVersion = /redis_version:(\S+)/.exec(await run.meters[0].client.info('server'))?.[1] ?? 'unknown';
  const report = {
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    date: new Date().toISOString(),
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      node: process.version,
      redis: redisVersion,
    },
    options: { ...options, out: relative(ROOT, options.out) },
    rows,
  };
  mkdirSync(dirname(options.out), { recursive: true });
  writeFileSync(options.out, `${JSON.stringify(report, null, 2)}\n`);
  const html = htmlPathFor(options.out);
  writeFileSync(html, htmlReport(report, chartJsSource()));
  return { machine: report.machine, html };
}

/**
 * The products one sale of a row sells: `one` alone (today's single product), or with
 * --products N, N of them named by `many(1..N)`: `p1`..`pN` for the measured sale. Each id is its own hash tag {p:<id>}, so
 * on a cluster each product's keys share a slot and the products spread over slots.
 */
function productIds(options: BenchOptions, one: string, many: (i: number) => string): string[] {
  if (options.products === 1) return [one];
  return Array.from({ length: options.products }, (_, i) => many(i + 1));
}

/** Every buyer once, plus the duplicates. */
function requests(options: BenchOptions): number {
  return options.buyers + Math.round(options.buyers * options.duplicates);
}

/**
 * Each row's figures as multiples of the comparison servers' measured in the same run:
 * throughput and p99 of the baseline's, app CPU per request of the bare Fastify route's;
 * a telemetry-off row's throughput as a multiple of its strategy's with telemetry on.
 */
function withRatios(rows: Row[]): Row[] {
  const ratio = (a: number, b: number) => Math.round((a / Math.max(b, 1)) * 100) / 100;
  const baseline = rows.find((r) => r.strategy === 'baseline');
  const routeCpu = rows.find((r) => r.strategy === 'fastify-route')?.cost.appCpuUsPerRequest;
  const telemetryOn = (row: Row) =>
    rows.find((r) => r.strategy === row.strategy && r.workers === row.workers && r.telemetry);
  const settleOff = (row: Row) =>
    rows.find(
      (r) =>
        r.strategy === row.strategy && r.workers === row.workers && r.telemetry === row.telemetry && r.settle === false,
    );
  return rows.map((row) => ({
    ...row,
    ...(row.settle &&
      settleOff(row) && { vsSettleOff: { throughput: ratio(row.throughput, settleOff(row)!.throughput) } }),
    ...(!row.telemetry &&
      telemetryOn(row) && { vsTelemetryOn: { throughput: ratio(row.throughput, telemetryOn(row)!.throughput) } }),
    ...(baseline && {
      vsBaseline: {
        throughput: ratio(row.throughput, baseline.throughput),
        p99: ratio(row.latency.p99, baseline.latency.p99),
      },
    }),
    ...(routeCpu &&
      row.cost.appCpuUsPerRequest !== null && {
        vsFastifyRoute: { appCpuPerRequest: Math.round((row.cost.appCpuUsPerRequest / routeCpu) * 100) / 100 },
      }),
    ...(row.queue &&
      noQueueCpu(rows, row) !== null && {
        vsNoQueue: { appCpuPerRequest: ratio(row.cost.appCpuUsPerRequest!, noQueueCpu(rows, row)!) },
      }),
  }));
}

/** The same set-up's row without a waiting room, measured in this run. */
function withoutQueue(rows: readonly Row[], row: Row): Row | undefined {
  return rows.find(
    (r) =>
      !r.queue &&
      r.strategy === row.strategy &&
      r.workers === row.workers &&
      r.telemetry === row.telemetry &&
      r.settle === row.settle &&
      r.auth === row.auth,
  );
}

/** That row's app CPU per request, when both rows have one. */
function noQueueCpu(rows: readonly Row[], row: Row): number | null {
  if (row.cost.appCpuUsPerRequest === null) return null;
  return withoutQueue(rows, row)?.cost.appCpuUsPerRequest ?? null;
}

/** --queue off,RATE: what the waiting room saved (or cost) the app per request, row by row. */
function queueComparisons(rows: readonly Row[]): string[] {
  return rows.flatMap((row) => {
    const without = row.queue && row.vsNoQueue ? withoutQueue(rows, row) : undefined;
    if (!without) return [];
    return [
      `${row.label}: app CPU per request ${row.vsNoQueue!.appCpuPerRequest}x the same sale's without a waiting room ` +
        `(${row.cost.appCpuUsPerRequest!.toFixed(1)} vs ${without.cost.appCpuUsPerRequest!.toFixed(1)} µs; ` +
        `${n(row.requests)} requests vs ${n(without.requests)})`,
    ];
  });
}

/** Entry point (scripts/bench.js): runs main, stops everything it started, exits. */
export function cli(): void {
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      process.stderr.write(`\n[bench] ${signal}: stopping everything the bench started\n`);
      void stopAll().finally(() => process.exit(130));
    });
  }
  main()
    .then(async (code) => {
      await stopAll();
      process.exit(code);
    })
    .catch(async (err: Error) => {
      // What was in flight when a signal stopped the apps and Redis fails with them
      // (a closed connection): the signal's handler exits, with its own code.
      if (stopping) return;
      process.stderr.write(
        err instanceof UsageError ? `${err.message}\n\n${USAGE}` : `[bench] failed: ${err.stack ?? err.message}\n`,
      );
      await stopAll();
      process.exit(err instanceof UsageError ? 2 : 1);
    });
}
