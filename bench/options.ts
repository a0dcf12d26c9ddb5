/**
 * `npm run bench` options: parsed strictly, a usage error exits 2 with the usage.
 */
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT } from '../harness/paths';
import { CONFIG_DEFAULTS, LOCK_STRATEGY_NAMES, LockStrategyName, UNSAFE_STRATEGIES } from '../src/config/app-config';
import { checkNoTargetFlags, TargetDeployment, targetOf } from './target-options';
import { UsageError } from './usage-error';

export { UsageError };
export type { TargetDeployment };
import { MAX_BUCKETS } from '../src/sale/buckets';

export interface BenchOptions {
  readonly buyers: number;
  readonly duplicates: number;
  readonly connections: number;
  readonly stock: number;
  readonly quantity: number;
  readonly strategies: LockStrategyName[];
  /** App process counts to run each strategy with (node:cluster); the baseline is always one. */
  readonly workers: number[];
  /** Whether each strategy runs with the app's telemetry on, off (TELEMETRY=0), or both: a row each. */
  readonly telemetry: boolean[];
  /** On a terminal, pause before each measured sale so the dashboard can be opened. */
  readonly watch: boolean;
  readonly warmup: number;
  readonly redis?: string;
  readonly out: string;
  /** Also run the minimal node:http baseline first, and give every row its ratios to it. */
  readonly baseline: boolean;
  /** Send an Idempotency-Key with every purchase (implied by retries > 0). */
  readonly keys: boolean;
  /** Times a buyer told 503 retries with its key after the load. */
  readonly retries: number;
  /**
   * Measure the sold-out path: stock 0, so every purchase is answered SOLD_OUT, and
   * first run bench/baselines/fastify-route.ts, whose app CPU per request every row is
   * compared with.
   */
  readonly soldOutPath: boolean;
  /** Products each row sells at once, --stock units each; the buyers are spread over them round-robin. */
  readonly products: number;
  /** Run on a private Redis Cluster of this many masters (at least 3) instead of one server. */
  readonly cluster?: number;
  /** Whether each strategy's app settles its orders into a private PostgreSQL (judged too), doesn't, or both: a row each. */
  readonly settle: boolean[];
  /** --pay F: after the sale, pay that share of the orders, cancel half the rest, let the others expire, resell. */
  readonly pay?: number;
  /** The sale's payment deadline with --pay, ms. */
  readonly paymentTimeoutMs: number;
  /**
   * --starts-in MS: the sale opens that long after its PUT (startsAt, Redis's clock); the
   * buyers arrive before it and keep trying, honouring Retry-After (bench/starts-in.ts).
   */
  readonly startsInMs?: number;
  /**
   * --auth: each strategy runs with these buyer-token set-ups, a row each: `off` (no
   * BUYER_AUTH), `hs256` (a generated secret) or `es256` (a generated P-256 key pair,
   * the app given its public key): every buyer sends a token minted before the pass.
   */
  readonly auth: BenchAuth[];
  /** --queue: each strategy runs with these waiting rooms, a row each: admitPerSecond, or 0 for none. */
  readonly queue: number[];
  /**
   * --catalog N: idle products (idle-1..idle-N) each row's app lists before its sale; with
   * N > 0 every row runs twice, without the catalog and with it (bench/catalog.ts).
   */
  readonly catalog: number;
  /** --target: a deployment already running (bench/target.ts); no app is started. */
  readonly target?: TargetDeployment;
  /** --buckets: each strategy runs with these escrow bucket counts, a row each (1: the product's own keys only). */
  readonly buckets: number[];
  /** --skew F: that share of the buyers have bucket 0 as their home bucket (bucketed rows). */
  readonly skew?: number;
}

export const BENCH_AUTH = ['off', 'hs256', 'es256'] as const;
export type BenchAuth = (typeof BENCH_AUTH)[number];

/** What a row runs: a strategy of the app, or one of the comparison servers in bench/baselines. */
export type Target = LockStrategyName | 'baseline' | 'fastify-route' | 'raw-http';

/** Sizes that differ under --sold-out-path: nothing to sell, so a cheaper load of more requests per connection. */
const SIZES = {
  sale: { buyers: '100000', connections: '1000', stock: '1000' },
  soldOutPath: { buyers: '50000', connections: '200', stock: '0' },
} as const;

export const USAGE = `usage: npm run bench -- [options]

  --buyers N        distinct buyers, one purchase request each       (100000)
  --duplicates F    extra requests reusing an earlier buyer, as a
                    fraction of --buyers (0.1 = 10% more requests)   (0)
  --connections C   concurrent connections                            (1000)
  --stock S         units on sale, per product                        (1000)
  --quantity Q      units per purchase (also the per-user limit)      (1)
  --strategy LIST   comma-separated: ${LOCK_STRATEGY_NAMES.join(', ')}, or all  (${CONFIG_DEFAULTS.lockStrategy}: the app's default)
  --workers LIST    app processes sharing the port (node:cluster); a
                    list (1,2) runs every strategy with each count    (1)
  --telemetry LIST  on, off (the app with TELEMETRY=0 and LOG_LEVEL=error: no
                    metrics, dashboard aggregate or info logs), or on,off
                    (or off,on: the order they run in): a row each, and the
                    off/on throughput ratio of each strategy         (on)
  --warmup N        warm-up requests on a separate product            (10000)
  --watch           on a terminal (stdin and stderr both a TTY), wait a few
                    seconds before each measured sale, to open the dashboard
                    address the bench prints ("watch it live: ...")
  --baseline        first run bench/baselines/atomic-http.ts (node:http + one Lua
                    script, no framework, no lock) and show every row as a ratio to it
  --sold-out-path   measure the sold-out path: stock 0, so every purchase is answered
                    SOLD_OUT (--buyers 50000 and --connections 200 unless given), and
                    first run bench/baselines/fastify-route.ts (bare Fastify, the app's
                    route schema, 409 without Redis), giving every row its app CPU per
                    request as a ratio to that route's
  --keys            send an Idempotency-Key with every purchase (a fresh key each)
  --retries N       after the load, each buyer told 503 retries up to N times with
                    its key and body (implies --keys)                    (0)
  --products N      sell N products at once (p1..pN, each in its own hash slot),
                    each with --stock units; buyer i buys product i mod N, so
                    per-user limits hold per product. Each product is judged on its
                    own, plus totals                                   (1)
  --cluster K       run on a private Redis Cluster of K masters (K >= 3) started
                    for the run, instead of one Redis server
  --settle LIST     on: settle every order into a private PostgreSQL (one
                    database per row) and check it after the sale: every
                    order there once, with the status Redis has; off: no
                    DATABASE_URL; on,off: a row each, and each settling row's
                    throughput as a ratio to its strategy's without  (on)
  --pay F           as each order's 201 arrives, pay that share of them (0 to
                    1), cancel half of the rest and leave the others to expire
                    at their payment deadline; after the sale, a second wave
                    of buyers buys the units back in stock (and pays). One
                    product, no --retries
  --payment-timeout MS  the sale's payment deadline with --pay        (10000)
  --starts-in MS    the sale opens MS after it is set up (startsAt, by Redis's
                    clock): the buyers arrive before the start and keep trying,
                    honouring Retry-After; the verdict checks that no order is
                    older than the start, and the report says how much the first
                    second after the opening sold. One product
  --auth LIST       buyer tokens (BUYER_AUTH): off, hs256 (a generated secret),
                    es256 (a generated P-256 key; the app verifies with its
                    public key), or a list (off,es256): a row each. Every buyer
                    sends a token minted with jose before the measured pass, so
                    the cost table's app CPU per request shows verification's
                    price. Not with --pay or --retries                 (off)
  --queue LIST      the sale behind a waiting room admitting RATE buyers a
                    second: each buyer joins, reads its ticket when
                    Retry-After says, and buys with its pass; the verdict also
                    checks from Redis that every order is an admitted buyer's.
                    off, RATE, or off,RATE: a row each, and the queued row's
                    app CPU per request as a ratio to the row without. One
                    product, one unit a buyer; not with --starts-in,
                    --pay, --retries or --sold-out-path                (off)
  --catalog N       each row runs twice: as without it, then with N idle
                    products (idle-1..idle-N, a little stock each, nothing
                    bought) listed through the app's admin API before its
                    warm-up; the report gives the with/without throughput
                    ratio (same run)                                   (0)
  --buckets LIST    escrow buckets of each product (PUT buckets: N), a row
                    each: 1,3 runs every strategy with 1 and with 3; on
                    --cluster they sit on distinct masters, else on one
                    Redis (the report says so)                        (1)
  --skew F          that share (0 to 1) of the buyers is chosen so their
                    home bucket is bucket 0, the rest spread as without it;
                    needs a --buckets count above 1; one product, not
                    with --auth                                       (0)
  --redis URL       use this Redis instead of starting a private one; a
                    node of a Redis Cluster: the cluster (every master read
                    and metered, the app given REDIS_CLUSTER_NODES)
  --target URL[,URL...]  load-test a deployment already running there (no app
                    started): the sale is started through its admin API on a
                    product of the run's own (bench-<run id>), the buyers are
                    spread over the URLs, and the row is judged from --redis
                    (its Redis) and --database (its PostgreSQL, if it settles).
                    Needs --admin-token and --redis; not with --strategy,
                    --workers, --telemetry, --settle, --catalog, --baseline,
                    --sold-out-path, --cluster, --products, --retries or
                    --watch; --pay pays with the admin token; --auth hs256
                    only, with the deployment's --buyer-secret and claims
                    (docs/bench.md)
  --admin-token T   the deployment's ADMIN_TOKEN, with --target
  --buyer-secret S  with --target --auth hs256: the S of its BUYER_AUTH=hs256:S
  --buyer-issuer I  with --target --auth hs256: its BUYER_AUTH_ISSUER
  --buyer-audience A  with --target --auth hs256: its BUYER_AUTH_AUDIENCE
  --database URL    the deployment's PostgreSQL, with --target
  --key-prefix P    the deployment's KEY_PREFIX, with --target       (seckill:)
  --out FILE        JSON results, and beside it the HTML report with charts
                    (FILE without .json, plus .html)  (bench/results/<timestamp>.json)
`;

export function parseOptions(argv: string[]): BenchOptions {
  const flags = {
    // Defaults from SIZES, which depend on --sold-out-path.
    buyers: { type: 'string' },
    duplicates: { type: 'string', default: '0' },
    connections: { type: 'string' },
    stock: { type: 'string' },
    quantity: { type: 'string', default: '1' },
    strategy: { type: 'string', default: CONFIG_DEFAULTS.lockStrategy },
    workers: { type: 'string', default: '1' },
    telemetry: { type: 'string', default: 'on' },
    watch: { type: 'boolean', default: false },
    warmup: { type: 'string', default: '10000' },
    redis: { type: 'string' },
    out: { type: 'string' },
    baseline: { type: 'boolean', default: false },
    keys: { type: 'boolean', default: false },
    retries: { type: 'string', default: '0' },
    'sold-out-path': { type: 'boolean', default: false },
    products: { type: 'string', default: '1' },
    cluster: { type: 'string' },
    settle: { type: 'string', default: 'on' },
    pay: { type: 'string' },
    'payment-timeout': { type: 'string', default: '10000' },
    'starts-in': { type: 'string' },
    auth: { type: 'string', default: 'off' },
    queue: { type: 'string', default: 'off' },
    catalog: { type: 'string', default: '0' },
    target: { type: 'string' },
    'admin-token': { type: 'string' },
    database: { type: 'string' },
    'key-prefix': { type: 'string' },
    'buyer-secret': { type: 'string' },
    'buyer-issuer': { type: 'string' },
    'buyer-audience': { type: 'string' },
    buckets: { type: 'string', default: '1' },
    skew: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  } as const;
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: flags, strict: true });
  } catch (err) {
    // Unknown flags and missing values are the user's to fix: usage, exit 2.
    throw new UsageError((err as Error).message);
  }
  const { values } = parsed;
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const int = (name: string, value: string, min: number, max: number): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || n < min || n > max) {
      throw new UsageError(`--${name} must be an integer from ${min} to ${max}, got "${value}"`);
    }
    return n;
  };
  const fraction = (name: string, value: string): number => {
    if (!/^(0(\.\d+)?|1(\.0+)?)$/.test(value)) {
      throw new UsageError(`--${name} must be a fraction from 0 to 1, got "${value}"`);
    }
    return Number(value);
  };
  const duplicates = Number(values.duplicates);
  if (!Number.isFinite(duplicates) || duplicates < 0 || duplicates > 10) {
    throw new UsageError(`--duplicates must be a number from 0 to 10, got "${values.duplicates}"`);
  }
  const names = values.strategy === 'all' ? [...LOCK_STRATEGY_NAMES] : values.strategy!.split(',').map((s) => s.trim());
  for (const name of names) {
    if (!(LOCK_STRATEGY_NAMES as readonly string[]).includes(name)) {
      throw new UsageError(`--strategy: unknown "${name}"; known: ${LOCK_STRATEGY_NAMES.join(', ')}, all`);
    }
  }
  if (values.redis !== undefined && !/^rediss?:\/\//.test(values.redis)) {
    throw new UsageError(`--redis must be a redis:// URL, got "${values.redis}"`);
  }
  const soldOutPath = values['sold-out-path'] ?? false;
  const size = soldOutPath ? SIZES.soldOutPath : SIZES.sale;
  const stock = int('stock', values.stock ?? size.stock, 0, 10_000_000);
  if (soldOutPath && stock !== 0) {
    throw new UsageError(`--sold-out-path measures a sold-out product: --stock must be 0, got ${stock}`);
  }
  // With nothing to sell, an unsafe strategy cannot show its oversell, and the bench would
  // count its control as blind and fail.
  const unsafe = names.filter((name) => UNSAFE_STRATEGIES.includes(name as LockStrategyName));
  if (soldOutPath && unsafe.length > 0) {
    throw new UsageError(
      `--sold-out-path measures the sold-out path of the safe strategies; ${unsafe.join(', ')} cannot oversell a sold-out product`,
    );
  }
  const buyers = int('buyers', values.buyers ?? size.buyers, 1, 10_000_000);
  const products = int('products', values.products!, 1, 1000);
  if (products > buyers) {
    throw new UsageError(`--products ${products} needs at least as many buyers, got --buyers ${buyers}`);
  }
  const retries = int('retries', values.retries!, 0, 100);
  if (products > 1 && retries > 0) {
    throw new UsageError('--retries runs with one product only; drop --products or --retries');
  }
  let cluster: number | undefined;
  if (values.cluster !== undefined) {
    if (/^\d+$/.test(values.cluster) && Number(values.cluster) < 3) {
      throw new UsageError(
        `--cluster needs at least 3 masters (Redis Cluster will not form with fewer), got ${values.cluster}`,
      );
    }
    cluster = int('cluster', values.cluster, 3, 32);
    // Both name where the data lives: one of them must go.
    if (values.redis !== undefined) throw new UsageError('--cluster starts its own Redis: it cannot go with --redis');
    // bench/baselines/atomic-http.ts speaks to one Redis server only.
    if (values.baseline) throw new UsageError('--baseline runs on one Redis server: it cannot go with --cluster');
  }
  const telemetry = [...new Set(values.telemetry!.split(',').map((t) => t.trim()))].map((t) => {
    if (t !== 'on' && t !== 'off')
      throw new UsageError(`--telemetry takes on, off or on,off, got "${values.telemetry}"`);
    return t === 'on';
  });
  const settle = [...new Set(values.settle!.split(',').map((t) => t.trim()))].map((t) => {
    if (t !== 'on' && t !== 'off') throw new UsageError(`--settle takes on, off or on,off, got "${values.settle}"`);
    return t === 'on';
  });
  let pay: number | undefined;
  if (values.pay !== undefined) {
    pay = fraction('pay', values.pay);
    if (products > 1 || retries > 0) throw new UsageError('--pay runs with one product and no --retries');
    if (soldOutPath) throw new UsageError('--pay needs orders: it cannot go with --sold-out-path');
  }
  let startsInMs: number | undefined;
  if (values['starts-in'] !== undefined) {
    startsInMs = int('starts-in', values['starts-in'], 100, 600_000);
    if (products > 1 || soldOutPath) throw new UsageError('--starts-in runs with one product that has stock');
  }
  const auth = [...new Set(values.auth!.split(',').map((a) => a.trim()))].map((a) => {
    if (!(BENCH_AUTH as readonly string[]).includes(a)) {
      throw new UsageError(`--auth takes off, hs256, es256 or a list of them, got "${values.auth}"`);
    }
    return a as BenchAuth;
  });
  // Their second waves and retries send requests of their own, without tokens.
  if (auth.some((a) => a !== 'off') && (pay !== undefined || retries > 0)) {
    throw new UsageError('--auth does not go with --pay or --retries yet: their extra requests carry no token');
  }
  const queue = [...new Set(values.queue!.split(',').map((q) => q.trim()))].map((q) =>
    q === 'off' ? 0 : int('queue', q, 1, 1_000_000),
  );
  if (queue.some((q) => q > 0)) {
    if (products > 1 || soldOutPath || pay !== undefined || retries > 0 || startsInMs !== undefined) {
      throw new UsageError(
        '--queue runs one product with stock, bought through its waiting room: not with --products, --sold-out-path, --pay, --retries or --starts-in',
      );
    }
    // A pass for a remainder below the quantity buys nothing and holds its place until it lapses.
    if (values.quantity !== '1') throw new UsageError('--queue buys one unit a buyer: not with --quantity');
  }
  const target = values.target === undefined ? undefined : targetOf(argv, values);
  if (!target) checkNoTargetFlags(values);
  const buckets = [...new Set(values.buckets!.split(',').map((b) => int('buckets', b.trim(), 1, MAX_BUCKETS)))];
  let skew: number | undefined;
  if (values.skew !== undefined) {
    skew = fraction('skew', values.skew);
    if (!buckets.some((b) => b > 1))
      throw new UsageError('--skew sends buyers to one bucket: it needs --buckets above 1');
    // The skewed buyers are named apart from b0..bN: no --products round-robin, no tokens minted for them.
    if (products > 1 || auth.some((a) => a !== 'off')) throw new UsageError('--skew runs one product, without --auth');
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  return {
    buyers,
    duplicates,
    connections: int('connections', values.connections ?? size.connections, 1, 20_000),
    stock,
    quantity: int('quantity', values.quantity!, 1, 100),
    // A deployment runs one strategy, its own: /health names it (bench/target.ts).
    strategies: target ? [] : (names as LockStrategyName[]),
    workers: [...new Set(values.workers!.split(',').map((w) => int('workers', w.trim(), 1, 64)))],
    telemetry,
    watch: values.watch ?? false,
    warmup: int('warmup', values.warmup!, 0, 1_000_000),
    redis: values.redis,
    baseline: values.baseline ?? false,
    keys: (values.keys ?? false) || retries > 0,
    retries,
    soldOutPath,
    products,
    ...(cluster !== undefined && { cluster }),
    // Its PostgreSQL is the deployment's (--database), not one the bench starts.
    settle: target ? [] : settle,
    ...(pay !== undefined && { pay }),
    paymentTimeoutMs: int('payment-timeout', values['payment-timeout']!, 1000, 3_600_000),
    ...(startsInMs !== undefined && { startsInMs }),
    auth,
    queue,
    catalog: int('catalog', values.catalog!, 0, 100_000),
    ...(target && { target }),
    buckets,
    ...(skew !== undefined && { skew }),
    out: resolve(values.out ?? join(ROOT, 'bench', 'results', `${stamp}.json`)),
  };
}
