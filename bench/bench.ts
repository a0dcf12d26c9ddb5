/**
 * The flash-sale bench: fires N distinct buyers at the real service, one fresh app
 * (or cluster of apps) per strategy, then reads the verdict from Redis itself.
 *
 *   npm run bench -- --buyers 100000 --connections 1000 --stock 1000 --strategy lock,none
 *
 * Exit code 1 when a safe strategy breaks an invariant, or when the `none` control
 * fails to oversell (a bench that cannot see overselling proves nothing).
 */
import { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, startRedis } from '../scripts/redis-server';
import { LOCK_STRATEGY_NAMES, LockStrategyName, UNSAFE_STRATEGIES } from '../src/config/app-config';
import { KeyLayout } from '../src/redis/key-layout';
import { runLoad } from './load';
import { BASELINE_MAIN, ROOT, startApp, startSale, stopAll, track } from './processes';
import { formatReport, Row } from './report';
import { judge, readSale } from './verdict';

export interface BenchOptions {
  readonly buyers: number;
  readonly duplicates: number;
  readonly connections: number;
  readonly stock: number;
  readonly quantity: number;
  readonly strategies: LockStrategyName[];
  /** App process counts to run each strategy with (node:cluster); the baseline is always one. */
  readonly workers: number[];
  readonly warmup: number;
  readonly redis?: string;
  readonly out: string;
  /** Also run the minimal node:http baseline first, and give every row its ratios to it. */
  readonly baseline: boolean;
}

/** What a row runs: a strategy of the app, or the baseline server. */
type Target = LockStrategyName | 'baseline';

const USAGE = `usage: npm run bench -- [options]

  --buyers N        distinct buyers, one purchase request each       (100000)
  --duplicates F    extra requests reusing an earlier buyer, as a
                    fraction of --buyers (0.1 = 10% more requests)   (0)
  --connections C   concurrent connections                            (1000)
  --stock S         units on sale                                     (1000)
  --quantity Q      units per purchase (also the per-user limit)      (1)
  --strategy LIST   comma-separated: ${LOCK_STRATEGY_NAMES.join(', ')}, or all  (lock)
  --workers LIST    app processes sharing the port (node:cluster); a
                    list (1,2) runs every strategy with each count    (1)
  --warmup N        warm-up requests on a separate product            (10000)
  --baseline        first run bench/baselines/atomic-http.ts (node:http + one Lua
                    script, no framework, no lock) and show every row as a ratio to it
  --redis URL       use this Redis instead of starting a private one
  --out FILE        JSON results                    (bench/results/<timestamp>.json)
`;

export function parseOptions(argv: string[]): BenchOptions {
  const flags = {
    buyers: { type: 'string', default: '100000' },
    duplicates: { type: 'string', default: '0' },
    connections: { type: 'string', default: '1000' },
    stock: { type: 'string', default: '1000' },
    quantity: { type: 'string', default: '1' },
    strategy: { type: 'string', default: 'lock' },
    workers: { type: 'string', default: '1' },
    warmup: { type: 'string', default: '10000' },
    redis: { type: 'string' },
    out: { type: 'string' },
    baseline: { type: 'boolean', default: false },
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
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  return {
    buyers: int('buyers', values.buyers!, 1, 10_000_000),
    duplicates,
    connections: int('connections', values.connections!, 1, 20_000),
    stock: int('stock', values.stock!, 0, 10_000_000),
    quantity: int('quantity', values.quantity!, 1, 100),
    strategies: names as LockStrategyName[],
    workers: [...new Set(values.workers!.split(',').map((w) => int('workers', w.trim(), 1, 64)))],
    warmup: int('warmup', values.warmup!, 0, 1_000_000),
    redis: values.redis,
    baseline: values.baseline ?? false,
    out: resolve(values.out ?? join(ROOT, 'bench', 'results', `${stamp}.json`)),
  };
}

export class UsageError extends Error {}

/** Sales the `none` control gets to show an oversell before the bench calls itself blind. */
const CONTROL_ATTEMPTS = 3;

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

  let redisUrl = options.redis;
  if (!redisUrl) {
    const dir = mkdtempSync(join(tmpdir(), 'seckill-bench-'));
    const redis = await startRedis({ dir, appendonly: true });
    track({ stop: () => redis.stop().then(() => rmSync(dir, { recursive: true, force: true })) });
    redisUrl = redis.url;
    log(`private Redis at ${redis.url} (AOF everysec, removed afterwards)`);
  }
  // Redlock's lock nodes: three more private servers, whatever --redis says.
  let redlockUrls = '';
  if (options.strategies.includes('redlock')) {
    const nodes = await Promise.all(
      [1, 2, 3].map(async () => {
        const dir = mkdtempSync(join(tmpdir(), 'seckill-bench-redlock-'));
        const node = await startRedis({ dir, appendonly: false });
        track({ stop: () => node.stop().then(() => rmSync(dir, { recursive: true, force: true })) });
        return node.url;
      }),
    );
    redlockUrls = nodes.join(',');
    log(`Redlock lock nodes at ${redlockUrls}`);
  }
  const client = new Redis(redisUrl);
  track({ stop: () => client.quit().catch(() => client.disconnect()) });
  const redisVersion = /redis_version:(\S+)/.exec(await client.info('server'))?.[1] ?? 'unknown';

  const runId = Date.now().toString(36);
  const rows: Row[] = [];
  const runs: [Target, number][] = [
    ...(options.baseline ? [['baseline', 1] as [Target, number]] : []),
    ...options.strategies.flatMap((s) => options.workers.map((w): [Target, number] => [s, w])),
  ];
  for (const [target, workers] of runs) {
    rows.push(await runStrategy(target, workers, redisUrl, redlockUrls, client, runId, options, log));
  }
  const baseline = rows.find((r) => r.strategy === 'baseline');
  const compared = baseline ? rows.map((r) => withRatios(r, baseline)) : rows;

  const report = {
    command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version, redis: redisVersion },
    options: { ...options, out: relative(ROOT, options.out) },
    rows: compared,
  };
  mkdirSync(dirname(options.out), { recursive: true });
  writeFileSync(options.out, `${JSON.stringify(report, null, 2)}\n`);
  const { text, failed } = formatReport(compared);
  process.stdout.write(`${text}\n`);
  log(`results: ${relative(process.cwd(), options.out)}`);
  return failed ? 1 : 0;
}

/** Throughput and p99 as multiples of the baseline's, measured in the same run. */
function withRatios(row: Row, baseline: Row): Row {
  const ratio = (a: number, b: number) => Math.round((a / Math.max(b, 1)) * 100) / 100;
  return {
    ...row,
    vsBaseline: { throughput: ratio(row.throughput, baseline.throughput), p99: ratio(row.latency.p99, baseline.latency.p99) },
  };
}

async function runStrategy(
  strategy: Target,
  workers: number,
  redisUrl: string,
  redlockUrls: string,
  client: Redis,
  runId: string,
  options: BenchOptions,
  log: (line: string) => void,
): Promise<Row> {
  const unsafe = strategy !== 'baseline' && UNSAFE_STRATEGIES.includes(strategy);
  const prefix = `bench:${runId}:${strategy}:x${workers}:`;
  const label = workers > 1 ? `${strategy} ×${workers}` : strategy;
  const token = randomBytes(18).toString('base64url');
  const app = await startApp({
    workers,
    port: await freePort(),
    main: strategy === 'baseline' ? BASELINE_MAIN : undefined,
    env: {
      REDIS_URL: redisUrl,
      ...(strategy === 'redlock' ? { REDLOCK_URLS: redlockUrls } : {}),
      ADMIN_TOKEN: token,
      LOCK_STRATEGY: strategy,
      ALLOW_UNSAFE: unsafe ? '1' : '0',
      KEY_PREFIX: prefix,
      LOG_LEVEL: 'warn',
    },
  });
  log(`${label}: app up (${workers} worker${workers > 1 ? 's' : ''}) at ${app.url}${unsafe ? ' — UNSAFE on purpose' : ''}`);
  const keys = new KeyLayout(prefix);
  const products = ['warmup'];
  try {
    const total = options.buyers + Math.round(options.buyers * options.duplicates);
    if (options.warmup > 0) {
      // The same shape as the measured sale, smaller: the same connections, and stock
      // in the same proportion, so both the buying and the sold-out paths are compiled
      // hot (and every connection is open) before the clock starts.
      const warmStock = Math.max(1, Math.round((options.warmup * options.stock) / total));
      await startSale(app.url, token, 'warmup', warmStock, options.quantity);
      await runLoad({
        url: app.url,
        productId: 'warmup',
        buyers: options.warmup,
        duplicates: 0,
        connections: options.connections,
        quantity: options.quantity,
      });
    }
    // The negative control's race window is one Redis round trip, so how far it
    // oversells varies from run to run (3 to 144 units at the default size). A sale
    // that happens to show nothing is run again on a fresh product, and the row says
    // so; only CONTROL_ATTEMPTS blind sales in a row mean the bench cannot see it.
    const attempts = strategy === 'none' ? CONTROL_ATTEMPTS : 1;
    let attempt = 0;
    let load;
    let verdict;
    do {
      attempt++;
      const productId = attempt === 1 ? 'hot' : `hot-${attempt}`;
      products.push(productId);
      await startSale(app.url, token, productId, options.stock, options.quantity);
      const progress = { done: 0 };
      const stockKey = keys.product(productId).stock;
      const reporter = startProgress(label, total, progress, () => client.get(stockKey), options.stock);
      load = await runLoad(
        {
          url: app.url,
          productId,
          buyers: options.buyers,
          duplicates: options.duplicates,
          connections: options.connections,
          quantity: options.quantity,
        },
        progress,
      ).finally(() => reporter.stop());
      verdict = judge(await readSale(client, keys.product(productId)), load, options.quantity);
      if (verdict.oversold === 0 && attempt < attempts) log(`${label}: sale ${attempt} did not oversell; running it again`);
    } while (verdict.oversold === 0 && attempt < attempts);
    const exitCode = await app.stop();
    if (exitCode !== 0) verdict.problems.push(`the app exited ${exitCode} on SIGTERM instead of 0`);
    const allHold = Object.values(verdict.invariants).every(Boolean);
    return {
      strategy,
      unsafe,
      buyers: options.buyers,
      requests: total,
      connections: options.connections,
      stock: options.stock,
      quantity: options.quantity,
      workers,
      durationMs: load.durationMs,
      throughput: Math.round((load.sent / load.durationMs) * 1000),
      latency: load.latency,
      status: load.status,
      codes: load.codes,
      errors: load.errors,
      timeouts: load.timeouts,
      ...verdict,
      attempts: attempt,
      pass: unsafe ? !allHold : allHold && exitCode === 0,
    };
  } finally {
    await app.stop();
    if (options.redis) {
      // A Redis the user named: remove what this run wrote, and only that.
      const written = products.flatMap((id) => Object.values(keys.product(id)));
      await client.del(...written);
    }
  }
}

/** A live line on a TTY; a plain line every 5 s otherwise (CI logs). */
function startProgress(
  strategy: string,
  total: number,
  progress: { done: number },
  readStock: () => Promise<string | null>,
  stock: number,
) {
  const tty = process.stderr.isTTY;
  const started = Date.now();
  let last = { at: started, done: 0 };
  const tick = async () => {
    const left = Number(await readStock().catch(() => null));
    const now = Date.now();
    const rate = Math.round(((progress.done - last.done) / Math.max(now - last.at, 1)) * 1000);
    last = { at: now, done: progress.done };
    const line =
      `[bench] ${strategy}: ${progress.done.toLocaleString('en-US')}/${total.toLocaleString('en-US')} requests, ` +
      `sold ${(stock - left).toLocaleString('en-US')}/${stock.toLocaleString('en-US')}, ${rate.toLocaleString('en-US')} req/s`;
    process.stderr.write(tty ? `\r\x1b[K${line}` : `${line}\n`);
  };
  const timer = setInterval(() => void tick(), tty ? 250 : 5_000);
  return {
    stop: () => {
      clearInterval(timer);
      if (tty) process.stderr.write('\r\x1b[K');
    },
  };
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
      process.stderr.write(err instanceof UsageError ? `${err.message}\n\n${USAGE}` : `[bench] failed: ${err.stack ?? err.message}\n`);
      await stopAll();
      process.exit(err instanceof UsageError ? 2 : 1);
    });
}
