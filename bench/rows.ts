/**
 * What one bench run and each of its rows stand on: the run's Redis, Redlock nodes,
 * PostgreSQL and clients; a row's fresh app, its warm-up, and its clean-up.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { startSale } from '../harness/http';
import { BASELINE_MAIN, FASTIFY_ROUTE_MAIN, RAW_HTTP_MAIN } from '../harness/paths';
import { RunningApp, startApp, track } from '../harness/processes';
import { PrivatePostgres, quiesce, startPrivatePostgres } from '../harness/postgres';
import { REDLOCK_NODE, startPrivateRedis } from '../harness/redis';
import { UNSAFE_STRATEGIES } from '../src/config/app-config';
import { KeyLayout } from '../src/redis/key-layout';
import { MARK_TAGS } from '../src/redis/shard-marks';
import { PAYMENT_SECRET, Payer } from './afterlife';
import { mintBuyerTokens, tokenCount } from './buyer-tokens';
import { bucketKeys } from './buckets';
import type { CatalogFigures } from './catalog';
import type { MeteredNode } from './cost';
import { LoadOptions, loadAt } from './load';
import { BenchAuth, BenchOptions, Target } from './options';
import { loadThroughQueueAt } from './queue-load';
import { rowLabel } from './report';
import { newRunId } from './run-id';
import { BenchClient, connect, RunRedis, startRunRedis } from './run-redis';
import { measuredProducts, productIds } from './scenarios/products';

export const n = (x: number) => x.toLocaleString('en-US');

/** Rows given a database so far (each its own). */
let rowsStarted = 0;

/** The comparison servers' entry points; every other target is a strategy of the app. */
export const SERVERS: Partial<Record<Target, string>> = {
  baseline: BASELINE_MAIN,
  'fastify-route': FASTIFY_ROUTE_MAIN,
  'raw-http': RAW_HTTP_MAIN,
};

/** --watch: long enough to open the printed address, short enough not to bore. */
const WATCH_SECONDS = 5;

/** What every row of one bench run shares. */
export interface Run {
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

/** What a row runs: one target with one value of each of the options that make rows. */
export interface RowSpec {
  readonly target: Target;
  readonly workers: number;
  /** False: the app runs with TELEMETRY=0. */
  readonly telemetry: boolean;
  readonly settle: boolean;
  /** --auth: the buyer tokens the app verifies (off: none). */
  readonly auth: BenchAuth;
  /** --queue: the sale's waiting room admits this many buyers a second (0: no waiting room). */
  readonly queue: number;
  /** --catalog: idle products listed before the sale (0: none). */
  readonly catalog: number;
  /** --buckets: the escrow buckets each product is sold from (1: its own keys only). */
  readonly buckets: number;
}

/** --catalog N: each row's catalog sizes, in the order they run: none, then N (a row each). */
export function catalogs(options: BenchOptions): number[] {
  return options.catalog > 0 ? [0, options.catalog] : [0];
}

/** One row's app, and what it wrote. */
export interface RowApp extends Omit<RowSpec, 'settle' | 'catalog' | 'buckets'> {
  readonly label: string;
  /** --buckets: its products' escrow buckets; absent: 1 (a deployment's row, bench/target.ts). */
  readonly buckets?: number;
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
  /** --auth: each buyer's token. */
  readonly tokens?: ReadonlyMap<string, string>;
  /** --catalog: the idle products its app listed, once listed (bench/catalog.ts). */
  catalog?: CatalogFigures;
  /** --target: every instance of the deployment, the buyers spread over them (bench/scenarios/spread.ts). */
  readonly urls?: readonly string[];
  /** --pay: how its orders are paid (signed with PAYMENT_SECRET unless said: a deployment's with its admin token). */
  readonly payer?: Payer;
  /** --target: the products of the measured sale's `attempt` are the run's own ids, not hot/p1.. */
  readonly measuredProducts?: (attempt: number) => string[];
}

/** The Redis servers (unless --redis names one) and the verdict's client. */
export async function prepare(options: BenchOptions): Promise<Run> {
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
    runId: newRunId(),
    log,
    ...(postgres && { postgres }),
  };
}

export async function startTarget(run: Run, spec: RowSpec): Promise<RowApp> {
  const { target, workers, telemetry, settle, auth, queue, catalog, buckets } = spec;
  const unsafe = (UNSAFE_STRATEGIES as readonly string[]).includes(target);
  const prefix = `bench:${run.runId}:${target}:x${workers}${telemetry ? '' : ':t0'}${settle ? '' : ':s0'}${
    auth === 'off' ? '' : `:a-${auth}`
  }${queue ? `:q${queue}` : ''}${catalog ? `:c${catalog}` : ''}${buckets > 1 ? `:k${buckets}` : ''}:`;
  // The comparison servers settle nothing: their label says nothing of it.
  const label = rowLabel({
    strategy: target,
    workers,
    telemetry,
    ...(!SERVERS[target] && { settle }),
    ...(auth !== 'off' && { auth }),
    ...(queue > 0 && { queue: { admitPerSecond: queue } }),
    ...(catalog > 0 && { catalog: { products: catalog } }),
    ...(buckets > 1 && { buckets: { count: buckets } }),
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
    buckets,
    ...(buyerTokens && { tokens: buyerTokens.tokens }),
    ...(databaseUrl && { databaseUrl }),
  };
  watchLine(run, t, measuredProducts(run.options, 1)[0]);
  return t;
}

/** Where the app's dashboard shows the measured sale as it happens (a comparison server has none). */
export function watchLine(run: Run, t: RowApp, productId: string): void {
  if (SERVERS[t.target]) return;
  run.log(`${t.label}: watch it live: ${t.app.url}/?product=${encodeURIComponent(productId)}`);
}

/**
 * --watch, for a learner at a terminal: time to open the page before the burst. Never
 * in CI or a pipe (a test's output is not a terminal), where it would only slow the run.
 */
export async function pauseToWatch(run: Run, t: RowApp): Promise<void> {
  if (!run.options.watch || !process.stdin.isTTY || !process.stderr.isTTY || SERVERS[t.target]) return;
  run.log(`${t.label}: the sale starts in ${WATCH_SECONDS} s: open the address above to watch it (--watch)`);
  await sleep(WATCH_SECONDS * 1000);
}

/**
 * The same shape as the measured sale, smaller: the same connections, and stock in
 * the same proportion, so both the buying and the sold-out paths are compiled hot
 * (and every connection is open) before the clock starts.
 */
export async function warmUp(run: Run, t: RowApp): Promise<void> {
  const { options } = run;
  if (options.warmup === 0) return;
  // Per product: each of N warm-up products gets 1/N of the requests, as each measured one does.
  const warmStock = Math.max(1, Math.round((options.warmup * options.stock) / requests(options)));
  // A deployment's warm-up product is the run's own too (bench/target.ts).
  const ids = t.measuredProducts
    ? [`${t.measuredProducts(1)[0]}-warmup`]
    : productIds(options, 'warmup', (i) => `warmup-${i}`);
  t.products.push(...ids);
  await Promise.all(
    ids.map((id) =>
      startSale(t.app.url, t.token, id, warmStock, options.quantity, undefined, { ...queued(t), ...bucketed(t) }),
    ),
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
  await (t.queue ? loadThroughQueueAt(t.urls ?? [warm.url], warm, t.queue) : loadAt(t.urls)(warm));
}

/** --queue: the PUT's waiting room for a row that has one. */
export function queued(t: RowApp): Record<string, unknown> {
  return t.queue ? { queue: { admitPerSecond: t.queue } } : {};
}

/** --buckets: the PUT's bucket count for a bucketed row (none for 1: the field left out, as a user would). */
export function bucketed(t: Pick<RowApp, 'buckets'>): Record<string, unknown> {
  return (t.buckets ?? 1) > 1 ? { buckets: t.buckets } : {};
}

/** After a row: its settling database made quiet for the next row, and, in a Redis the user named, what this row wrote removed (only that). */
export async function cleanUp(run: Run, t: RowApp): Promise<void> {
  // A settling row's writes are flushed and vacuumed before the next row starts (a
  // failure here is only said: the row's verdict is in, and cleaning up goes on).
  if (t.databaseUrl) {
    await quiesce(t.databaseUrl).catch((err: Error) => run.log(`${t.label}: PostgreSQL not quiesced: ${err.message}`));
  }
  if (!run.options.redis) return;
  // One DEL per bucket of each product (a product unbucketed is its one bucket): a
  // bucket's keys share a slot, different buckets' and products' may not; bucket 0 last,
  // its meta names the others. Then the row's own keys of the whole prefix (each its own
  // slot), and each shard's work marks (one DEL per tag: its two keys share a slot):
  // nothing of the row is left.
  for (const id of t.products) {
    for (const k of (await bucketKeys(run.client, t.keys, id)).reverse()) await run.client.del(...Object.values(k));
  }
  for (const key of [t.keys.products, t.keys.settling]) await run.client.del(key);
  for (const tag of MARK_TAGS) await run.client.del(...Object.values(t.keys.marks(tag)));
}

/** Every buyer once, plus the duplicates. */
export function requests(options: BenchOptions): number {
  return options.buyers + Math.round(options.buyers * options.duplicates);
}
