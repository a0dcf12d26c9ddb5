/**
 * What the fault scenarios share: their apps and clients, waiting for a state (never
 * for a moment), and the verdict of a sale under a fault, read from Redis.
 */
import { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { startSale } from '../../harness/http';
import { PAYMENT_SECRET } from '../afterlife';
import { processState, RunningApp, startApp, stopAll } from '../../harness/processes';
import { PrivateRedis, PrivateRedisOptions, startPrivateRedis } from '../../harness/redis';
import { KeyLayout } from '../../src/redis/key-layout';
import { emit, sinceOrigin } from '../events';
import { LoadOptions, LoadResult, mergeLoads, runLoad } from '../load';
import { LoadProgress, watchSale } from '../progress';
import { Invariants, judge, readSale } from '../verdict';
import { ERROR_CODES } from '../../src/errors/errors';
import { clockAtStart, HistoryFeed, judgeHistory, requestsOf } from './history-verdict';
import type { ClockReading } from '../history/clock';
import type { HistoryReport } from '../history/history';
import type { ProductKeys } from '../../src/redis/key-layout';

export interface Size {
  /** Buyers per app. */
  readonly buyers: number;
  readonly stock: number;
  readonly connections: number;
}

export interface Context {
  /** Smaller sales: the subset `npm test` runs. */
  readonly quick: boolean;
  /**
   * The network scenarios require every OUTCOME_UNKNOWN to be resolved by its retry
   * with the same Idempotency-Key (the order back if it was written, one purchase if
   * not). Off until the app honours the header: a retry cannot learn of a written order before.
   */
  readonly checkRetries: boolean;
  readonly log: (line: string) => void;
}

export interface Outcome {
  readonly name: string;
  readonly load: LoadResult;
  readonly sold: number;
  readonly left: number;
  /** Units sold beyond the stock: only ever allowed where it is the lesson (plain `lock` paused). */
  readonly oversold?: number;
  /** A promise the fault breaks by design, shown as the lesson (and required to break): the line says which. */
  readonly lesson?: string;
  /** Broken promises; empty when the scenario passed. */
  readonly problems: string[];
  /** What happened, in words, with the figures that show it. */
  readonly story: string;
  /** The checker's line (bench/history/check.ts historyLine): the peak, each check's state and count. */
  readonly history?: string;
}

export const TOKEN = randomBytes(18).toString('base64url');
export const PRODUCT = 'hot';
export const PREFIX = 'faults:';

/** Where the apps find Redis: one server's URL, or a cluster's seed nodes (a PrivateCluster will do). */
export type RedisTarget = string | { readonly clusterNodes: string };

/**
 * Apps that should be running and are not: each a problem naming it, with the last lines
 * it wrote (a crash's stack), so that a line's socket errors explain themselves.
 */
export function goneApps(running: readonly RunningApp[]): string[] {
  return running
    .filter((a) => {
      const state = processState(a.pid);
      return state === null || state === 'Z';
    })
    .map(
      (a) => `app pid ${a.pid} exited during the load; its last lines: ${a.tail().split('\n').slice(-8).join(' | ')}`,
    );
}

/** `count` apps of `strategy` on `redis`, each a real process on a port of its own. */
export function apps(
  count: number,
  strategy: string,
  redis: RedisTarget,
  env: Record<string, string> = {},
): Promise<RunningApp[]> {
  const where: Record<string, string> =
    typeof redis === 'string' ? { REDIS_URL: redis } : { REDIS_CLUSTER_NODES: redis.clusterNodes };
  return Promise.all(
    Array.from({ length: count }, () =>
      startApp({
        env: {
          ...where,
          ADMIN_TOKEN: TOKEN,
          PAYMENT_WEBHOOK_SECRET: PAYMENT_SECRET,
          LOCK_STRATEGY: strategy,
          KEY_PREFIX: PREFIX,
          LOG_LEVEL: 'error',
          ...env,
        },
      }),
    ),
  );
}

/**
 * The env that arms an app's fault hook: it stops itself (SIGSTOP) at its `nth` hold
 * that reaches its write, right after its validity check (FAULT_STOP_AT).
 */
export function stopsAtWrite(nth: number): Record<string, string> {
  return { FAULT_STOP_AT: `before-write:${nth}`, ALLOW_UNSAFE: '1' };
}

/** Resolves once the process is stopped (state T): a state to wait for, not a moment to catch. */
export async function waitForStop(app: RunningApp, what: string, timeoutMs = 20_000): Promise<void> {
  await waitUntil(what, async () => processState(app.pid) === 'T', timeoutMs);
}

export async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/**
 * Resolves once the Redis is writing no AOF rewrite: a fresh Redis with AOF on refuses
 * a SIGTERM while it writes its first one, and a restart scenario's outage must start
 * when it says it does.
 */
export async function noAofRewrite(client: Redis): Promise<void> {
  await waitUntil('the first AOF rewrite to finish', async () => {
    const persistence = await client.info('persistence');
    return /aof_rewrite_in_progress:0/.test(persistence) && /aof_rewrite_scheduled:0/.test(persistence);
  });
}

/** A client of the harness's own: an outage is expected, so its errors are not news. */
export function harnessClient(url: string): Redis {
  const client = new Redis(url, { maxRetriesPerRequest: null });
  client.on('error', () => undefined);
  return client;
}

/** The pid that holds the product's lock, read from the token (`<pid>:<random>`), or null. */
export async function holderPid(client: Redis, k: ProductKeys): Promise<number | null> {
  const token = await client.get(k.lock);
  const pid = token ? Number(token.split(':')[0]) : NaN;
  return Number.isInteger(pid) ? pid : null;
}

/**
 * A named step of a scenario, as it happens (the holder paused, the other took the
 * lock, the late write refused): a line of the lab's timeline (bench/events.ts), and
 * nothing on the CLI, whose one line per scenario tells the story afterwards. `at`
 * (Date.now() when it happened) places a step learnt afterwards, e.g. from the order
 * stream, where it belongs on the time axis.
 */
export function timeline(step: string, detail?: string, at?: number): void {
  const ms = sinceOrigin() - (at === undefined ? 0 : Date.now() - at);
  emit({ type: 'step', step, ...(detail !== undefined && { detail }), ms });
}

/** The last step of a late-write scenario, once its verdict knows: the late write applied (oversold) or refused. */
export function lateWrite(outcome: Outcome, at: number): void {
  timeline(
    outcome.oversold ? 'late write applied' : 'late write refused',
    outcome.oversold
      ? `nothing in Redis checked it: OVERSOLD ${n(outcome.oversold)}, the failure fencing prevents`
      : 'nothing of it written',
    at,
  );
}

/**
 * Whether the history's oversell names a late write: the first order held above the
 * stock is one of the late writer's buyers (userId prefix).
 */
export function lateWriteNamed(report: HistoryReport, userPrefix: string): boolean {
  return report.findings.some((f) => f.check === 'oversell' && f.userId?.startsWith(userPrefix));
}

/**
 * For the lab: a scenario's sale begins. Its time axis starts here, the live sold
 * line (Redis's stock key, sampled; `progress` counts the answers) until stopped,
 * and the first step. Nothing, and no reads, when no lab listens.
 */
export function saleStarted(
  label: string,
  stock: number,
  /** The demand, where known up front (0: the scenario loads in waves it decides as it goes). */
  requests: number,
  progress: LoadProgress,
  readStock: () => Promise<string | null>,
  detail: string,
): { stop(): void } {
  emit({ type: 'sale', label, stock, requests, attempt: 1 });
  const watch = watchSale(label, progress, readStock, stock);
  timeline('sale started', detail);
  return watch;
}

export const n = (x: number) => x.toLocaleString('en-US');

export function codesSeen(load: LoadResult, codes: string[]): string {
  return codes.map((c) => `${c} ×${n(load.codes[c] ?? 0)}`).join(', ');
}

/** "CODE ×count, ..." of answers counted by code. */
export const tallied = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([code, x]) => `${code} ×${n(x)}`)
    .join(', ');

/**
 * A proxy fault's promise: whether it has fired yet (a state to wait for, or to find
 * never came), and when (Date.now(), NaN before).
 */
export function armed(fault: Promise<void>): { fired: () => boolean; at: () => number } {
  let at = NaN;
  void fault.then(() => {
    at = Date.now();
  });
  return { fired: () => !Number.isNaN(at), at: () => at };
}

export const answered = (l: LoadResult) => Object.values(l.status).reduce((a, b) => a + b, 0);

export const fiveXx = (l: LoadResult) =>
  Object.entries(l.status)
    .filter(([s]) => s.startsWith('5'))
    .reduce((a, [, k]) => a + k, 0);

/** Several loads as one (bench/load.ts). */
export const merge = mergeLoads;

export interface SaleVerdict {
  readonly sold: number;
  readonly left: number;
  readonly oversold: number;
  readonly load: LoadResult;
  readonly problems: string[];
  /** Orders in the stream beyond the 201s (a process killed or an outage between a write and its answer). */
  readonly unacknowledged: number;
  /** The sale judged as a history (history-verdict.ts): its line; its broken checks are in `problems`. */
  readonly history: string;
  readonly report: HistoryReport;
}

/**
 * The promises a fault must not break, from Redis: no oversell; every acknowledged
 * order in the stream and stock conserved; per-user limits; sold out when demand
 * allowed it. Orders the stream holds beyond the 201s are reported, not hidden.
 * `allowed` lists the 503 codes the fault may cause; any other 5xx, and any socket
 * error or timeout on a live app, is a broken promise.
 */
export async function verdict(
  // A single server, or a cluster client for a product in escrow buckets on several masters.
  client: Pick<Redis, 'hmget' | 'get' | 'hgetall' | 'xrange' | 'xinfo' | 'time'>,
  k: ProductKeys,
  live: LoadResult[],
  dead: LoadResult[],
  allowed: string[],
  options: { soldOut?: boolean; maxAnswerMs?: number; oversellIsTheLesson?: boolean; history: HistoryFeed },
): Promise<SaleVerdict> {
  // A killed app's load goes on knocking on a closed port until it stops: count
  // what that app answered, not the refused connection attempts.
  const load = merge([...live, ...dead.map((l) => ({ ...l, sent: answered(l), errors: 0 }))]);
  const sale = await readSale(client, k);
  const v = judge(sale, load, 1);
  // The bench's own accounting, conservation and undersell checks assume no fault
  // (no 5xx at all, one order per 201, a sale that ran to the end); their fault-aware
  // versions follow.
  const kept: (keyof Invariants)[] = options.oversellIsTheLesson ? ['perUserLimit'] : ['noOversell', 'perUserLimit'];
  const problems = kept.flatMap((name) => v.broken[name] ?? []);
  if (options.maxAnswerMs !== undefined && load.latency.max > options.maxAnswerMs) {
    problems.push(`an answer took ${load.latency.max} ms, more than ${options.maxAnswerMs} ms: a hang`);
  }
  const units = sale.orders.reduce((a, o) => a + o.quantity, 0);
  const inStream = new Set(sale.orders.map((o) => o.orderId));
  const lost = load.orderIds.filter((id) => !inStream.has(id)).length;
  if (lost > 0) problems.push(`${lost} acknowledged orders are not in the stream`);
  // A write applied twice (a command resent after a reconnect) shows as one orderId twice.
  const twice = sale.orders.length - inStream.size;
  if (twice > 0) problems.push(`${twice} orders written twice (the same orderId twice in the stream)`);
  if (sale.initialStock !== sale.stockLeft + units) {
    problems.push(`stock not conserved: ${sale.initialStock} != ${sale.stockLeft} left + ${units} ordered`);
  }
  if ((options.soldOut ?? true) && !v.invariants.noUndersell) {
    problems.push(`undersell: ${sale.stockLeft} left though demand exceeded the stock`);
  }
  for (const l of live) {
    if (l.errors > 0 || l.timeouts > 0)
      problems.push(`a live app left ${l.errors} socket errors and ${l.timeouts} timeouts`);
    if (l.sent !== answered(l) + l.errors + l.timeouts) problems.push('a live app left requests unanswered');
  }
  const unexpected = Object.entries(load.codes).filter(([code]) => isFiveXxCode(code) && !allowed.includes(code));
  if (unexpected.length > 0) problems.push(`unexpected 5xx: ${unexpected.map(([c, k]) => `${c} ×${k}`).join(', ')}`);
  // Every request, the killed app's unanswered ones too (outcome unknown), judged as a history.
  const history = await judgeHistory(client, k, requestsOf([...live, ...dead]), {
    ...options.history,
    lessons: [...(options.oversellIsTheLesson ? (['oversell'] as const) : []), ...(options.history.lessons ?? [])],
  });
  problems.push(...history.problems);
  return {
    history: history.line,
    report: history.report,
    sold: sale.initialStock - sale.stockLeft,
    left: sale.stockLeft,
    oversold: v.oversold,
    load,
    problems,
    unacknowledged: sale.orders.length - (load.status['201'] ?? 0),
  };
}

/** A code answered with a 5xx (the error table says which), or a bare 5xx the app never gives. */
export function isFiveXxCode(code: string): boolean {
  return (ERROR_CODES.get(code)?.status ?? 0) >= 500 || code.startsWith('HTTP_5');
}

/** `buyers` fresh buyers of PRODUCT, one unit each, against the app at `url`. */
export function buyersAt(
  url: string,
  buyers: number,
  connections: number,
  more: Partial<LoadOptions> = {},
  progress?: LoadProgress,
): Promise<LoadResult> {
  return runLoad({ url, productId: PRODUCT, buyers, duplicates: 0, connections, quantity: 1, ...more }, progress);
}

/** What every scenario on a private Redis stands on: the server, the harness's client, the product's keys. */
export interface RedisStage {
  readonly redis: PrivateRedis;
  readonly client: Redis;
  readonly k: ProductKeys;
  /** Redis's clock against ours, read before any sale: where the scenario's history starts. */
  readonly clock: ClockReading;
}

/**
 * Starts a private Redis (with `options`) and a harness client, runs `scenario` on
 * them, and stops everything afterwards: the client, every app and server started
 * (stopAll), then `afterStop` (what stood between the apps and Redis, e.g. proxies:
 * the apps first, so none is left reconnecting through a closed one).
 */
export async function onPrivateRedis<T>(
  scenario: (stage: RedisStage) => Promise<T>,
  options: PrivateRedisOptions = {},
  afterStop: () => Promise<unknown> = async () => undefined,
): Promise<T> {
  const redis = await startPrivateRedis(options);
  const client = harnessClient(redis.url);
  try {
    const clock = await clockAtStart(client);
    return await scenario({ redis, client, k: new KeyLayout(PREFIX).product(PRODUCT), clock });
  } finally {
    await client.quit().catch(() => undefined);
    await stopAll();
    await afterStop();
  }
}

/** Runs `scenario` while the lab's live line of a sale (saleStarted) is drawn, and stops it after. */
export async function watching<T>(watch: { stop(): void }, scenario: () => Promise<T>): Promise<T> {
  try {
    return await scenario();
  } finally {
    watch.stop();
  }
}

/** Two apps selling one product on a private Redis; `stopper` stops itself at its `stopAtWrite`th write. */
export interface HolderStage {
  readonly size: Size;
  readonly client: Redis;
  readonly k: ProductKeys;
  readonly stopper: RunningApp;
  readonly other: RunningApp;
  readonly clock: ClockReading;
  /** A load of `size.buyers` fresh buyers (ids prefixed) against one app. */
  load(app: RunningApp, userPrefix: string, signal?: AbortSignal): Promise<LoadResult>;
}

/** Sets up a HolderStage, runs `scenario` on it, and stops everything afterwards. */
export async function onHolderStage(
  ctx: Context,
  strategy: string,
  ttlMs: number,
  stopAtWrite: number,
  scenario: (stage: HolderStage) => Promise<Outcome>,
): Promise<Outcome> {
  const size: Size = ctx.quick
    ? { buyers: 1_500, stock: 200, connections: 50 }
    : { buyers: 5_000, stock: 600, connections: 100 };
  return onPrivateRedis(async ({ redis, client, k, clock }) => {
    const env = { LOCK_TTL_MS: String(ttlMs) };
    const [stopper] = await apps(1, strategy, redis.url, { ...env, ...stopsAtWrite(stopAtWrite) });
    const [other] = await apps(1, strategy, redis.url, env);
    await startSale(other.url, TOKEN, PRODUCT, size.stock, 1);
    // Both apps' answers, for the lab's live line (nothing without it).
    const progress: LoadProgress = { done: 0 };
    // The lab's time axis starts with the sale, as the bench's does.
    const watch = saleStarted(
      `${strategy}, 2 apps`,
      size.stock,
      size.buyers * 2,
      progress,
      () => client.get(k.stock),
      `${n(size.stock)} units, two ${strategy} apps (pids ${stopper.pid}, ${other.pid})`,
    );
    const load = (app: RunningApp, userPrefix: string, signal?: AbortSignal) =>
      buyersAt(app.url, size.buyers, size.connections, { userPrefix, signal }, progress);
    return watching(watch, () => scenario({ size, client, k, stopper, other, clock, load }));
  });
}
