/**
 * The fault suite: real app processes, real redis-server processes, real signals,
 * under load from the bench's load generator; the verdict comes from Redis itself.
 *
 *   npm run faults                      every scenario at full size
 *   npm run faults -- --quick           smaller sales (the subset `npm test` runs)
 *   npm run faults -- --only killed,paused-fenced
 *
 * One line per scenario: name, requests, 201s, 5xx, sold, stock left, invariants,
 * and what happened. Exit 1 if any scenario breaks a promise it must keep.
 */
import { Redis } from 'ioredis';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { freePort, startRedis } from '../scripts/redis-server';
import { KeyLayout, ProductKeys } from '../src/redis/key-layout';
import { LoadResult, runLoad } from './load';
import { RunningApp, startApp, startSale, stopAll, track } from './processes';
import { Invariants, judge, readSale } from './verdict';

interface Size {
  /** Buyers per app. */
  readonly buyers: number;
  readonly stock: number;
  readonly connections: number;
}

interface Outcome {
  readonly name: string;
  readonly load: LoadResult;
  readonly sold: number;
  readonly left: number;
  /** Units sold beyond the stock: only ever allowed where it is the lesson (plain `lock` paused). */
  readonly oversold?: number;
  /** Broken promises; empty when the scenario passed. */
  readonly problems: string[];
  /** What happened, in words, with the figures that show it. */
  readonly story: string;
}

interface Context {
  readonly quick: boolean;
  readonly log: (line: string) => void;
}

interface PrivateRedis {
  url: string;
  port: number;
  dir: string;
  stop(): Promise<unknown>;
  kill(): void;
}

const TOKEN = randomBytes(18).toString('base64url');
const PRODUCT = 'hot';

// ---------------------------------------------------------------- processes

async function privateRedis(appendonly: boolean, port?: number, dir?: string): Promise<PrivateRedis> {
  const home = dir ?? mkdtempSync(join(tmpdir(), 'seckill-faults-'));
  const redis = await startRedis({ dir: home, appendonly, ...(port ? { port } : {}) });
  const handle = { url: redis.url as string, port: redis.port as number, dir: home, stop: () => redis.stop(), kill: () => redis.kill() };
  track({ stop: () => redis.stop().catch(() => undefined) });
  return handle;
}

function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

async function apps(count: number, strategy: string, redisUrl: string, env: Record<string, string> = {}): Promise<RunningApp[]> {
  return Promise.all(
    Array.from({ length: count }, async () =>
      startApp({
        workers: 1,
        port: await freePort(),
        env: { REDIS_URL: redisUrl, ADMIN_TOKEN: TOKEN, LOCK_STRATEGY: strategy, KEY_PREFIX: 'faults:', LOG_LEVEL: 'error', ...env },
      }),
    ),
  );
}

/** The pid that holds the product's lock, read from the token (`<pid>:<random>`), or null. */
async function holderPid(client: Redis, k: ProductKeys): Promise<{ pid: number; token: string } | null> {
  const token = await client.get(k.lock);
  const pid = token ? Number(token.split(':')[0]) : NaN;
  return token && Number.isInteger(pid) ? { pid, token } : null;
}

/**
 * Freezes whichever of `candidates` holds the lock, and proves it still holds it
 * while frozen (the token did not change). With `fresh`, only a hold first seen
 * just now: the holder is then most likely between its read and its write, the
 * moment a pause does harm. Returns the frozen app, or throws.
 */
async function freezeHolder(client: Redis, k: ProductKeys, candidates: RunningApp[], fresh = false, timeoutMs = 15_000) {
  const held = await catchHolder(client, k, candidates, fresh, timeoutMs);
  if (!held) throw new Error('never caught an app holding the lock');
  return held;
}

/** As freezeHolder, or null if no hold (no fresh one, with `fresh`) shows up within `timeoutMs`. */
async function catchHolder(client: Redis, k: ProductKeys, candidates: RunningApp[], fresh: boolean, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  let last: string | null = fresh ? await client.get(k.lock) : null;
  while (Date.now() < deadline) {
    const held = await holderPid(client, k);
    const seenBefore = fresh && held?.token === last;
    last = held?.token ?? null;
    const app = held && candidates.find((a) => a.pid === held.pid);
    if (!held || !app || seenBefore) continue;
    process.kill(app.pid, 'SIGSTOP');
    const still = await client.get(k.lock);
    if (still === held.token) return { app, token: held.token, pttl: await client.pttl(k.lock), at: Date.now() };
    process.kill(app.pid, 'SIGCONT'); // it released just before the stop: try again
  }
  return null;
}

async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

async function health(app: RunningApp): Promise<{ http: number; lostLocks?: number }> {
  const res = await fetch(`${app.url}/health`);
  return { ...((await res.json()) as { lostLocks?: number }), http: res.status };
}

/** A client of the harness's own: an outage is expected, so its errors are not news. */
function harnessClient(url: string): Redis {
  const client = new Redis(url, { maxRetriesPerRequest: null });
  client.on('error', () => undefined);
  return client;
}

// ---------------------------------------------------------------- verdicts

function merge(loads: LoadResult[]): LoadResult {
  const sum = (pick: (l: LoadResult) => Record<string, number>) => {
    const out: Record<string, number> = {};
    for (const l of loads) for (const [key, n] of Object.entries(pick(l))) out[key] = (out[key] ?? 0) + n;
    return out;
  };
  return {
    sent: loads.reduce((a, l) => a + l.sent, 0),
    status: sum((l) => l.status),
    codes: sum((l) => l.codes),
    errors: loads.reduce((a, l) => a + l.errors, 0),
    timeouts: loads.reduce((a, l) => a + l.timeouts, 0),
    orderIds: loads.flatMap((l) => l.orderIds),
    distinctBuyers: loads.reduce((a, l) => a + l.distinctBuyers, 0),
    startedAt: Math.min(...loads.map((l) => l.startedAt)),
    durationMs: Math.max(...loads.map((l) => l.durationMs)),
    latency: {
      p50: Math.max(...loads.map((l) => l.latency.p50)),
      p90: Math.max(...loads.map((l) => l.latency.p90)),
      p99: Math.max(...loads.map((l) => l.latency.p99)),
      max: Math.max(...loads.map((l) => l.latency.max)),
    },
  };
}

const fiveXx = (l: LoadResult) => Object.entries(l.status).filter(([s]) => s.startsWith('5')).reduce((a, [, n]) => a + n, 0);

/**
 * The promises a fault must not break, from Redis: no oversell; every acknowledged
 * order in the stream and stock conserved; per-user limits; sold out when demand
 * allowed it. Orders the stream holds beyond the 201s (a process killed between its
 * write and its answer) are reported, not hidden. `allowed` lists the 503 codes the
 * fault may cause; anything else 5xx, and any socket error or timeout on a live app,
 * is a broken promise.
 */
async function verdict(
  client: Redis,
  k: ProductKeys,
  live: LoadResult[],
  dead: LoadResult[],
  allowed: string[],
  options: { soldOut?: boolean; maxAnswerMs?: number; oversellIsTheLesson?: boolean } = {},
): Promise<{ sold: number; left: number; oversold: number; load: LoadResult; problems: string[]; unacknowledged: number }> {
  // A killed app's load goes on knocking on a closed port until it stops: count
  // what that app answered, not the refused connection attempts.
  const answered = (l: LoadResult) => Object.values(l.status).reduce((a, b) => a + b, 0);
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
  if (sale.initialStock !== sale.stockLeft + units) problems.push(`stock not conserved: ${sale.initialStock} != ${sale.stockLeft} left + ${units} ordered`);
  if ((options.soldOut ?? true) && !v.invariants.noUndersell) problems.push(`undersell: ${sale.stockLeft} left though demand exceeded the stock`);
  for (const l of live) {
    if (l.errors > 0 || l.timeouts > 0) problems.push(`a live app left ${l.errors} socket errors and ${l.timeouts} timeouts`);
    if (l.sent !== Object.values(l.status).reduce((a, b) => a + b, 0) + l.errors + l.timeouts) problems.push('a live app left requests unanswered');
  }
  const unexpected = Object.entries(load.codes).filter(([code]) => /^(REDIS_|LOCK_|STALE_|INTERNAL|HTTP_5)/.test(code) && !allowed.includes(code));
  if (unexpected.length > 0) problems.push(`unexpected 5xx: ${unexpected.map(([c, n]) => `${c} ×${n}`).join(', ')}`);
  return {
    sold: sale.initialStock - sale.stockLeft,
    left: sale.stockLeft,
    oversold: v.oversold,
    load,
    problems,
    unacknowledged: sale.orders.length - (load.status['201'] ?? 0),
  };
}

const n = (x: number) => x.toLocaleString('en-US');

function codesSeen(load: LoadResult, codes: string[]): string {
  return codes.map((c) => `${c} ×${n(load.codes[c] ?? 0)}`).join(', ');
}

// ---------------------------------------------------------------- scenarios

/** SIGKILL the app holding the lock: the others wait out the TTL, then sell on. */
async function holderKilled(ctx: Context): Promise<Outcome> {
  const size: Size = ctx.quick ? { buyers: 1_500, stock: 200, connections: 50 } : { buyers: 5_000, stock: 600, connections: 100 };
  const ttlMs = 1_500;
  const redis = await privateRedis(false);
  const client = harnessClient(redis.url);
  const k = new KeyLayout('faults:').product(PRODUCT);
  try {
    const pair = await apps(2, 'lock', redis.url, { LOCK_TTL_MS: String(ttlMs) });
    await startSale(pair[0].url, TOKEN, PRODUCT, size.stock, 1);
    const stop = pair.map(() => new AbortController());
    const loads = pair.map((app, i) =>
      runLoad({ url: app.url, productId: PRODUCT, buyers: size.buyers, duplicates: 0, connections: size.connections, quantity: 1, userPrefix: `a${i}-`, signal: stop[i].signal }),
    );
    // Well into the sale, so both apps have answered buyers before one dies.
    await waitUntil('a third of the stock to sell', async () => Number(await client.get(k.stock)) <= size.stock * 0.66);
    const frozen = await freezeHolder(client, k, pair);
    process.kill(frozen.app.pid, 'SIGKILL');
    const victim = pair.indexOf(frozen.app);
    stop[victim].abort();
    const results = await Promise.all(loads);
    const after = (await client.xrange(k.orders, `${frozen.at}`, '+', 'COUNT', 1))[0];
    const gap = after ? Number(after[0].split('-')[0]) - frozen.at : null;
    const v = await verdict(client, k, results.filter((_, i) => i !== victim), [results[victim]], []);
    if (gap === null) v.problems.push('nothing was sold after the kill');
    else if (gap < frozen.pttl - 50) v.problems.push(`a sale ${gap} ms after the kill, while the dead holder's lock still had ${frozen.pttl} ms`);
    return {
      name: 'holder killed (lock, 2 apps)',
      ...v,
      story:
        `SIGKILL pid ${frozen.app.pid} holding the lock (TTL left ${n(frozen.pttl)} ms); next sale ${gap === null ? 'never' : `${n(gap)} ms`} later, ` +
        `by the other app; the killed app had answered ${n(Object.values(results[victim].status).reduce((a, b) => a + b, 0))} ` +
        `(${n(results[victim].status['201'] ?? 0)} × 201) and wrote ${v.unacknowledged} orders it never acknowledged`,
    };
  } finally {
    await client.quit();
    await stopAll();
    removeDir(redis.dir);
  }
}

/** SIGSTOP the holder past its TTL, then SIGCONT: another app takes the lock meanwhile. */
async function holderPaused(ctx: Context, strategy: 'lock' | 'fenced'): Promise<Outcome> {
  const size: Size = ctx.quick ? { buyers: 1_500, stock: 200, connections: 50 } : { buyers: 5_000, stock: 600, connections: 100 };
  const ttlMs = 400;
  const pauseMs = 1_200;
  // Whether the pause lands before the holder's write left the process is luck of
  // timing; a sale whose holder had already written shows the two holders but no
  // late write, so up to this many sales are run to catch one.
  const maxSales = ctx.quick ? 5 : 10;
  const redis = await privateRedis(false);
  const client = harnessClient(redis.url);
  const keys = new KeyLayout('faults:');
  try {
    const pair = await apps(2, strategy, redis.url, { LOCK_TTL_MS: String(ttlMs) });
    let outcome: Outcome | undefined;
    for (let sale = 1; sale <= maxSales; sale++) {
      const productId = `paused-${sale}`;
      const k = keys.product(productId);
      await startSale(pair[0].url, TOKEN, productId, size.stock, 1);
      const lostBefore = await Promise.all(pair.map(async (a) => (await health(a)).lostLocks ?? 0));
      const loads = pair.map((app, i) =>
        runLoad({ url: app.url, productId, buyers: size.buyers, duplicates: 0, connections: size.connections, quantity: 1, userPrefix: `s${sale}a${i}-` }),
      );
      // Halfway: the other app needs the lock to sell the other half, and sells it out
      // during the pause, so a late write of the paused holder takes units no longer there.
      await waitUntil('half the stock to sell', async () => Number(await client.get(k.stock)) <= size.stock * 0.5);
      const frozen = await catchHolder(client, k, pair, true, 3_000);
      if (!frozen) {
        // The sale ended in holds that had begun already: nothing fresh to catch.
        await Promise.all(loads);
        if (sale === maxSales) throw new Error(`no fresh hold caught in ${maxSales} sales`);
        continue;
      }
      const other = pair.find((a) => a !== frozen.app)!;
      // A write the holder sent just before the stop lands anyway; if it sold the last
      // units, the other app has nothing to take the lock for: no contest, next sale.
      await sleep(20);
      const stockAtFreeze = Number(await client.get(k.stock));
      const contested = stockAtFreeze > 0;
      // While the paused app still believes it holds the lock, does the other one get
      // it? Seen in the key if we poll while it holds; a coalesced hold can be shorter
      // than our polling, but then the units it sold meanwhile prove it (the paused
      // app cannot write, and nobody writes without the lock).
      let secondHolderAfter: number | null = null;
      while (Date.now() < frozen.at + pauseMs) {
        const held = await holderPid(client, k);
        if (secondHolderAfter === null && held?.pid === other.pid) secondHolderAfter = Date.now() - frozen.at;
        await sleep(2);
      }
      const soldInPause = stockAtFreeze - Number(await client.get(k.stock));
      process.kill(frozen.app.pid, 'SIGCONT');
      const results = await Promise.all(loads);
      const lost = ((await health(frozen.app)).lostLocks ?? 0) - lostBefore[pair.indexOf(frozen.app)];
      // Plain `lock` has no defence against a late write: if it oversells, that is the
      // lesson of this scenario, reported below, not a failure of the suite.
      const v = await verdict(client, k, results, [], ['LOCK_TIMEOUT', 'STALE_LOCK'], { oversellIsTheLesson: strategy === 'lock' });
      const twoHolders = secondHolderAfter !== null || soldInPause > 0;
      if (!twoHolders && contested) v.problems.push('the other app never took the lock during the pause');
      if (lost === 0) v.problems.push('the paused app never noticed it had lost the lock');
      const paused = results[pair.indexOf(frozen.app)];
      const lateWrite = Boolean(paused.codes.STALE_LOCK || paused.codes.LOCK_TIMEOUT) || v.oversold > 0;
      const late = paused.codes.STALE_LOCK
        ? 'its late write was refused by the fence: nothing written'
        : v.oversold > 0
          ? `its late write went through after the other holder's: OVERSOLD ${n(v.oversold)}, the failure fencing prevents`
          : paused.codes.LOCK_TIMEOUT
            ? 'its late write was stopped by its validity check'
            : 'no late write: it had written before the pause, and its release found the lock gone';
      if (!contested && sale === maxSales) v.problems.push(`no sale of ${maxSales} caught a holder with stock left to contest`);
      outcome = {
        name: `holder paused (${strategy}, 2 apps)`,
        ...v,
        story:
          `sale ${sale}: SIGSTOP pid ${frozen.app.pid} holding the lock for ${n(pauseMs)} ms (TTL ${ttlMs} ms): ` +
          `${twoHolders ? 'two holders' : 'no contest (the holder had sold the last units)'}: pid ${other.pid} took it ` +
          `${secondHolderAfter === null ? 'between our polls' : `${n(secondHolderAfter)} ms into the pause`} and sold ${n(soldInPause)} units while it slept; ` +
          `after SIGCONT the paused app counted ${lost} lost ` +
          `hold(s) and answered ${codesSeen(paused, ['LOCK_TIMEOUT', 'STALE_LOCK'])}: ${late}`,
      };
      if (v.problems.length > 0 || (contested && lateWrite)) break;
    }
    return outcome!;
  } finally {
    await client.quit();
    await stopAll();
    removeDir(redis.dir);
  }
}

/** A single `lock` app selling on `redis`, with a load running; resolves once a quarter of the stock is sold. */
async function saleUnderWay(ctx: Context, redis: PrivateRedis, client: Redis, k: ProductKeys, env: Record<string, string> = {}) {
  const size: Size = ctx.quick ? { buyers: 6_000, stock: 1_500, connections: 100 } : { buyers: 20_000, stock: 5_000, connections: 200 };
  const [app] = await apps(1, 'lock', redis.url, env);
  await startSale(app.url, TOKEN, PRODUCT, size.stock, 1);
  const load = runLoad({ url: app.url, productId: PRODUCT, buyers: size.buyers, duplicates: 0, connections: size.connections, quantity: 1 });
  await waitUntil('a quarter of the stock to sell', async () => Number(await client.get(k.stock)) <= size.stock * 0.75);
  return { app, load, sold: size.stock - Number(await client.get(k.stock)) };
}

/** SIGTERM the Redis mid-sale, start it again on the same AOF folder. */
async function redisRestarted(ctx: Context): Promise<Outcome> {
  const downMs = 1_000;
  let redis = await privateRedis(true);
  const client = harnessClient(redis.url);
  const k = new KeyLayout('faults:').product(PRODUCT);
  try {
    const { app, load, sold: soldBefore } = await saleUnderWay(ctx, redis, client, k);
    await redis.stop();
    await sleep(downMs);
    redis = await privateRedis(true, redis.port, redis.dir);
    // A hold cut by the outage: its lock is in the AOF, and lives on until its TTL.
    const leftover = await client.pttl(k.lock);
    const result = await load;
    // Never a hang: every answer within the wait budget (5 s by default), plus slack.
    const v = await verdict(client, k, [result], [], ['REDIS_UNAVAILABLE', 'LOCK_TIMEOUT'], { maxAnswerMs: 6_000 });
    const unavailable = result.codes.REDIS_UNAVAILABLE ?? 0;
    if (unavailable === 0) v.problems.push('no buyer saw the outage (no REDIS_UNAVAILABLE)');
    const served = (await health(app)).http;
    if (served !== 200) v.problems.push(`/health answers ${served} after the restart`);
    return {
      name: 'redis restarted (lock)',
      ...v,
      story:
        `SIGTERM Redis after ${n(soldBefore)} sold, down ${n(downMs)} ms, restarted on the same AOF: ${codesSeen(result, ['REDIS_UNAVAILABLE', 'LOCK_TIMEOUT'])}, ` +
        `slowest answer ${n(result.latency.max)} ms; lock left from before the outage: ${leftover > 0 ? `yes, PTTL ${n(leftover)} ms` : 'no'}; ` +
        'the app sold on without a restart',
    };
  } finally {
    await client.quit();
    await stopAll();
    removeDir(redis.dir);
  }
}

/** CLIENT PAUSE longer than LOCK_WAIT_MS: waiting buyers get 503 LOCK_TIMEOUT on time. */
async function redisPaused(ctx: Context): Promise<Outcome> {
  const waitMs = 1_000;
  // Longer than the wait budget, shorter than the client's 2 s command timeout: a
  // command already sent completes after the pause, so a buyer is never told 503
  // for an order that then lands.
  const pauseMs = 1_500;
  const redis = await privateRedis(false);
  const client = harnessClient(redis.url);
  const k = new KeyLayout('faults:').product(PRODUCT);
  try {
    const { load } = await saleUnderWay(ctx, redis, client, k, { LOCK_WAIT_MS: String(waitMs) });
    await client.call('CLIENT', 'PAUSE', String(pauseMs), 'ALL');
    const result = await load;
    // Never a hang: a buyer waits its budget, or the pause for a command already sent.
    const v = await verdict(client, k, [result], [], ['LOCK_TIMEOUT'], { maxAnswerMs: pauseMs + 1_000 });
    if ((result.codes.LOCK_TIMEOUT ?? 0) === 0) v.problems.push('no buyer was answered LOCK_TIMEOUT during the pause');
    if (v.unacknowledged !== 0) v.problems.push(`${v.unacknowledged} orders written for buyers told otherwise`);
    return {
      name: 'redis paused (lock)',
      ...v,
      story: `CLIENT PAUSE ${n(pauseMs)} ms ALL (LOCK_WAIT_MS ${waitMs}): ${codesSeen(result, ['LOCK_TIMEOUT'])}, slowest answer ${n(result.latency.max)} ms`,
    };
  } finally {
    await client.quit();
    await stopAll();
    removeDir(redis.dir);
  }
}

/** Redlock over three nodes: one killed mid-sale, then two down, then both back. */
async function redlockNodes(ctx: Context): Promise<Outcome[]> {
  const size: Size = ctx.quick ? { buyers: 3_000, stock: 400, connections: 50 } : { buyers: 10_000, stock: 1_500, connections: 100 };
  const redis = await privateRedis(false);
  const nodes = await Promise.all([0, 1, 2].map(() => privateRedis(false)));
  const client = harnessClient(redis.url);
  const keys = new KeyLayout('faults:');
  const outcomes: Outcome[] = [];
  try {
    const [app] = await apps(1, 'redlock', redis.url, { REDLOCK_URLS: nodes.map((x) => x.url).join(',') });

    // 1. One node killed mid-sale: a majority (2 of 3) still grants the lock.
    const k1 = keys.product('one-down');
    await startSale(app.url, TOKEN, 'one-down', size.stock, 1);
    const load1 = runLoad({ url: app.url, productId: 'one-down', buyers: size.buyers, duplicates: 0, connections: size.connections, quantity: 1 });
    await waitUntil('a quarter of the stock to sell', async () => Number(await client.get(k1.stock)) <= size.stock * 0.75);
    const soldAtKill = size.stock - Number(await client.get(k1.stock));
    nodes[0].kill();
    const v1 = await verdict(client, k1, [await load1], [], []);
    outcomes.push({
      name: 'redlock: one of three nodes killed mid-sale',
      ...v1,
      story: `SIGKILL node 1 after ${n(soldAtKill)} sold; the other two kept granting the lock`,
    });

    // 2. Two nodes down: no quorum, nothing sold, every buyer told 503 at once.
    nodes[1].kill();
    await waitUntil('/health to say 503', async () => (await health(app)).http === 503);
    const k2 = keys.product('two-down');
    await startSale(app.url, TOKEN, 'two-down', size.stock, 1).catch(() => undefined); // needs the lock too: refused
    await client.hset(k2.meta, 'initialStock', size.stock, 'perUserLimit', 1);
    await client.set(k2.stock, size.stock);
    const load2 = await runLoad({ url: app.url, productId: 'two-down', buyers: Math.min(size.buyers, 1_000), duplicates: 0, connections: size.connections, quantity: 1 });
    const v2 = await verdict(client, k2, [load2], [], ['REDIS_UNAVAILABLE'], { soldOut: false, maxAnswerMs: 6_000 });
    if (v2.sold !== 0) v2.problems.push(`${v2.sold} sold without a quorum`);
    if ((load2.codes.REDIS_UNAVAILABLE ?? 0) !== load2.sent) v2.problems.push('not every buyer got 503 REDIS_UNAVAILABLE');
    outcomes.push({ name: 'redlock: two of three nodes down', ...v2, story: `SIGKILL node 2 too: ${codesSeen(load2, ['REDIS_UNAVAILABLE'])}, slowest answer ${n(load2.latency.max)} ms` });

    // 3. Both back on their ports: sales resume, without restarting the app.
    nodes[0] = await privateRedis(false, nodes[0].port, nodes[0].dir);
    nodes[1] = await privateRedis(false, nodes[1].port, nodes[1].dir);
    await waitUntil('/health to say 200', async () => (await health(app)).http === 200);
    const load3 = await runLoad({ url: app.url, productId: 'two-down', buyers: size.buyers, duplicates: 0, connections: size.connections, quantity: 1, userPrefix: 'back-' });
    const v3 = await verdict(client, k2, [load2, load3], [], ['REDIS_UNAVAILABLE']);
    outcomes.push({ name: 'redlock: nodes back', ...v3, load: load3, story: 'restarted nodes 1 and 2 on their ports; the same sale sold out' });
    return outcomes;
  } finally {
    await client.quit();
    await stopAll();
    for (const dir of [redis.dir, ...nodes.map((x) => x.dir)]) removeDir(dir);
  }
}

// ---------------------------------------------------------------- runner

const SCENARIOS: Record<string, (ctx: Context) => Promise<Outcome | Outcome[]>> = {
  killed: holderKilled,
  'paused-lock': (ctx) => holderPaused(ctx, 'lock'),
  'paused-fenced': (ctx) => holderPaused(ctx, 'fenced'),
  'redis-restarted': redisRestarted,
  'redis-paused': redisPaused,
  redlock: redlockNodes,
};

export function formatLine(o: Outcome): string {
  const load = o.load;
  return (
    `${o.problems.length === 0 ? 'PASS' : 'FAIL'} ${o.name}: ${n(load.sent)} requests, ${n(load.status['201'] ?? 0)} × 201, ` +
    `${n(fiveXx(load))} × 5xx, sold ${n(o.sold)}, stock left ${n(o.left)}, ` +
    `invariants ${o.problems.length > 0 ? `BROKEN: ${o.problems.join('; ')}` : o.oversold ? 'hold except noOversell, which plain lock cannot keep here (no fence)' : 'hold'} — ${o.story}`
  );
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { quick: { type: 'boolean', default: false }, only: { type: 'string' } },
  });
  const names = values.only ? values.only.split(',') : Object.keys(SCENARIOS);
  const unknown = names.filter((name) => !(name in SCENARIOS));
  if (unknown.length > 0) {
    process.stderr.write(`unknown scenario ${unknown.join(', ')}; known: ${Object.keys(SCENARIOS).join(', ')}\n`);
    return 2;
  }
  const ctx: Context = { quick: values.quick ?? false, log: (line) => process.stderr.write(`[faults] ${line}\n`) };
  let failed = false;
  for (const name of names) {
    ctx.log(`${name}...`);
    try {
      const result = await SCENARIOS[name](ctx);
      for (const outcome of [result].flat()) {
        failed ||= outcome.problems.length > 0;
        process.stdout.write(`${formatLine(outcome)}\n`);
      }
    } catch (err) {
      failed = true;
      process.stdout.write(`FAIL ${name}: ${(err as Error).stack ?? err}\n`);
    }
  }
  return failed ? 1 : 0;
}

/** Entry point (scripts/faults.js). */
export function cli(): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => void stopAll().finally(() => process.exit(130)));
  }
  main().then(
    async (code) => {
      await stopAll();
      process.exit(code);
    },
    async (err: Error) => {
      process.stderr.write(`[faults] failed: ${err.stack ?? err.message}\n`);
      await stopAll();
      process.exit(1);
    },
  );
}
