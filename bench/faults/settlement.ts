/**
 * Faults behind the sale: the settler killed at its COMMIT and at its XACK, PostgreSQL
 * stopped and paused mid-sale, Redis restarted while settling, payments racing the
 * deadline, the expiry sweeper killed mid-sweep. Each line is checked from Redis (the
 * sale's promises) and from PostgreSQL (every order there once, with the status Redis
 * has: bench/settled.ts). The kills land at named stop points (FAULT_STOP_AT), never by
 * timing. Each hot sale is one product of a catalog: IDLE_CATALOG idle products are listed
 * around it first, so the loops must find its work among products that have none.
 */
import { Redis } from 'ioredis';
import { Client } from 'pg';
import { setTimeout as sleep } from 'node:timers/promises';
import { listProducts, pay, request, startSale } from '../../harness/http';
import { PAYMENT_SECRET } from '../afterlife';
import { PrivatePostgres, startPrivatePostgres } from '../../harness/postgres';
import { RunningApp, stopAll } from '../../harness/processes';
import { PrivateRedis, startPrivateRedis } from '../../harness/redis';
import { KeyLayout, ProductKeys } from '../../src/redis/key-layout';
import { SETTLE_GROUP } from '../../src/settlement/settler';
import type { LoadResult } from '../load';
import type { ClockReading } from '../history/clock';
import type { SettledOrder } from '../history/history';
import { checkSettled, unsettled, waitForSettlement } from '../settled';
import { clockAtStart, judgeHistory, readSettled, requestsOf } from './history-verdict';
import {
  buyersAt,
  apps,
  Context,
  fiveXx,
  harnessClient,
  n,
  Outcome,
  PREFIX,
  PRODUCT,
  timeline,
  TOKEN,
  verdict,
  waitForStop,
  waitUntil,
} from './kit';

/** How long a dead settler's entries wait before another claims them, in these scenarios. */
const CLAIM_IDLE_MS = 500;
/** PostgreSQL statements give up after this in these scenarios (the pause outlasts it). */
const STATEMENT_TIMEOUT_MS = 1_000;
/** Idle products listed around the hot one before its sale (issue 39), each with IDLE_STOCK units and no buyer. */
const IDLE_CATALOG = 1_000;
const IDLE_STOCK = 10;

interface Stage {
  readonly redis: PrivateRedis;
  readonly pg: PrivatePostgres;
  readonly client: Redis;
  readonly k: ProductKeys;
  readonly db: string;
  /** Redis's clock against ours before the sale: the start of its history. */
  readonly clock: ClockReading;
  /** App processes on the stage's Redis; `settles`: with DATABASE_URL (a settler of the group). */
  start(env?: Record<string, string>, settles?: boolean): Promise<RunningApp>;
  /** Lists the idle catalog through `app`'s admin API, then starts the hot sale: one unit each per buyer. */
  startSale(app: RunningApp, stock: number, paymentTimeoutMs?: number): Promise<void>;
  load(app: RunningApp, buyers: number, userPrefix: string): Promise<LoadResult>;
}

async function onStage(
  ctx: Context,
  scenario: (stage: Stage) => Promise<Outcome>,
  appendonly = false,
): Promise<Outcome> {
  const [redis, pg] = await Promise.all([startPrivateRedis({ appendonly }), startPrivatePostgres()]);
  const client = harnessClient(redis.url);
  try {
    const db = await pg.createDatabase('faults');
    const keys = new KeyLayout(PREFIX);
    const k = keys.product(PRODUCT);
    const stage: Stage = {
      redis,
      pg,
      client,
      k,
      db,
      clock: await clockAtStart(client),
      start: async (env = {}, settles = true) =>
        (
          await apps(1, 'fenced', redis.url, {
            ...(settles && { DATABASE_URL: db }),
            SETTLE_CLAIM_IDLE_MS: String(CLAIM_IDLE_MS),
            PG_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
            ...env,
          })
        )[0],
      startSale: async (app, stock, paymentTimeoutMs) => {
        const idle = Array.from({ length: IDLE_CATALOG }, (_, i) => `idle-${i + 1}`);
        await listProducts(app.url, TOKEN, idle, IDLE_STOCK);
        await startSale(app.url, TOKEN, PRODUCT, stock, 1, paymentTimeoutMs);
      },
      load: (app, buyers, userPrefix) => buyersAt(app.url, buyers, ctx.quick ? 50 : 100, { userPrefix }),
    };
    const outcome = await scenario(stage);
    // Every line runs among the catalog: one that did not list it says so, and fails.
    const listed = (await stage.client.scard(keys.products)) - 1;
    return {
      ...outcome,
      problems:
        listed >= IDLE_CATALOG
          ? outcome.problems
          : [...outcome.problems, `${n(listed)} idle products listed, not ${n(IDLE_CATALOG)}`],
      story: `among ${n(listed)} idle products: ${outcome.story}`,
    };
  } finally {
    await client.quit().catch(() => undefined);
    await stopAll();
  }
}

/**
 * The PostgreSQL side of a line: settlement drained, then every order there once, as
 * Redis has it; and PostgreSQL's rows, for the history's total queue.
 */
async function settledProblems(
  stage: Stage,
  timeoutMs = 30_000,
): Promise<{ problems: string[]; drainMs: number | null; rows: number; settled?: SettledOrder[] }> {
  const drainMs = await waitForSettlement(stage.client, stage.k, timeoutMs);
  if (drainMs === null) {
    return {
      problems: [
        `settlement had not caught up ${timeoutMs} ms after the sale (${await unsettled(stage.client, stage.k)} unsettled)`,
      ],
      drainMs,
      rows: 0,
    };
  }
  const check = await checkSettled(stage.db, stage.client, stage.k, PRODUCT);
  const settled = await readSettled(stage.db, PRODUCT);
  return { problems: check.ok ? [] : [check.problem!], drainMs, rows: check.rows, settled };
}

/**
 * A settlement line's verdict: settlement drained first, so the history is judged with
 * PostgreSQL's rows as its total queue; then the sale's promises from Redis.
 */
async function settledVerdict(stage: Stage, loads: LoadResult[], allowed: string[] = [], drainMs?: number) {
  const s = await settledProblems(stage, drainMs);
  const v = await verdict(stage.client, stage.k, loads, [], allowed, {
    history: { start: stage.clock, ...(s.settled && { settled: s.settled }) },
  });
  return { v, s };
}

/** A line with no verdict of the sale's own (its promises are the afterlife's), judged as a history. */
const settledHistory = (stage: Stage, load: LoadResult, settled?: SettledOrder[]) =>
  judgeHistory(stage.client, stage.k, requestsOf([load]), { start: stage.clock, ...(settled && { settled }) });

async function pgCount(db: string, sql: string): Promise<number> {
  const c = new Client({ connectionString: db });
  await c.connect();
  try {
    return Number((await c.query(sql)).rows[0].n);
  } finally {
    await c.end();
  }
}

/**
 * A settler SIGKILLed at its second batch, after COMMIT and before XACK (the batch is in
 * PostgreSQL and still pending in Redis) or before COMMIT (nothing of it visible):
 * another app claims the entries after SETTLE_CLAIM_IDLE_MS and settles them, each
 * order once. The sale goes on meanwhile, on an app that only sells.
 */
export function settlerKilled(ctx: Context, point: 'settle-before-ack' | 'settle-before-commit'): Promise<Outcome> {
  return onStage(ctx, async (stage) => {
    const stock = ctx.quick ? 400 : 2_000;
    // The seller has no DATABASE_URL: the victim is the only settler until it dies.
    const seller = await stage.start({}, false);
    const victim = await stage.start({ FAULT_STOP_AT: `${point}:2`, ALLOW_UNSAFE: '1', SETTLE_BATCH: '100' });
    await stage.startSale(seller, stock);
    const sale = stage.load(seller, stock * 2, 'k-');
    await waitForStop(victim, `the settler to stop at ${point}:2`);
    const [pending] = (await stage.client.xpending(stage.k.orders, SETTLE_GROUP)) as [number];
    const rowsAtStop = await pgCount(stage.db, 'SELECT count(*) AS n FROM orders');
    timeline(
      'settler paused',
      `pid ${victim.pid} stopped itself at its second batch (${point}): ${n(pending)} entries pending, ${n(rowsAtStop)} rows in PostgreSQL`,
    );
    process.kill(victim.pid, 'SIGKILL');
    timeline('settler killed', `SIGKILL pid ${victim.pid}: its entries stay pending in Redis`);
    const rescuer = await stage.start();
    timeline('another settler started', `pid ${rescuer.pid} claims what is pending after ${CLAIM_IDLE_MS} ms idle`);
    const load = await sale;
    const { v, s } = await settledVerdict(stage, [load]);
    const problems = [...v.problems, ...s.problems];
    // After COMMIT the batch's rows are there while its entries are pending; before it, none is.
    if (point === 'settle-before-ack' && rowsAtStop <= 0)
      problems.push('nothing was in PostgreSQL at the stop after COMMIT');
    if (pending <= 0) problems.push('no entry was pending at the stop');
    const events = await pgCount(stage.db, 'SELECT count(*) AS n FROM order_events');
    if (events !== s.rows) problems.push(`${events} events recorded for ${s.rows} orders`);
    return {
      name: `settler killed ${point === 'settle-before-ack' ? 'after COMMIT, before XACK' : 'before COMMIT'}`,
      history: v.history,
      load,
      sold: v.sold,
      left: v.left,
      problems,
      story:
        `pid ${victim.pid} stopped at its second batch with ${n(pending)} entries pending and ${n(rowsAtStop)} rows in PostgreSQL ` +
        `(${point === 'settle-before-ack' ? 'its batch committed, not acknowledged' : 'its batch written, not committed'}); SIGKILL; ` +
        `pid ${rescuer.pid} claimed them after ${CLAIM_IDLE_MS} ms idle: ${n(s.rows)} orders in PostgreSQL, each once, ` +
        `${n(events)} events; settled ${s.drainMs ?? '?'} ms after the last answer`,
    };
  });
}

/**
 * PostgreSQL stopped (fast shutdown) or paused (SIGSTOP, past the statement timeout)
 * once a quarter of the stock is sold, for a few seconds: the sale goes on without a
 * 5xx, and settlement catches up once it is back.
 */
export function postgresDown(ctx: Context, how: 'stopped' | 'paused'): Promise<Outcome> {
  return onStage(ctx, async (stage) => {
    const stock = ctx.quick ? 3_000 : 8_000;
    const app = await stage.start();
    await stage.startSale(app, stock);
    const sale = stage.load(app, Math.round(stock * 1.5), 'p-');
    await waitUntil(
      'a quarter of the stock sold',
      async () => Number(await stage.client.get(stage.k.stock)) <= stock * 0.75,
    );
    const leftAtFault = Number(await stage.client.get(stage.k.stock));
    const outageMs = how === 'paused' ? STATEMENT_TIMEOUT_MS + 1_500 : 2_000;
    const pg = stage.pg;
    if (how === 'paused') pg.pause();
    else await pg.stop();
    timeline(
      `postgres ${how}`,
      `${how === 'paused' ? 'SIGSTOP' : 'fast shutdown'} with ${n(leftAtFault)} units left: the sale goes on`,
    );
    await sleep(outageMs);
    const leftAtReturn = Number(await stage.client.get(stage.k.stock));
    const lagAtReturn = await unsettled(stage.client, stage.k);
    if (how === 'paused') pg.resume();
    else await startPrivatePostgres({ port: pg.port, dir: pg.dir });
    timeline(
      'postgres back',
      `after ${n(outageMs)} ms: ${n(leftAtFault - leftAtReturn)} units sold meanwhile, ${n(lagAtReturn)} entries to settle`,
    );
    const load = await sale;
    const { v, s } = await settledVerdict(stage, [load]);
    const problems = [...v.problems, ...s.problems];
    const soldDuring = leftAtFault - leftAtReturn;
    if (soldDuring <= 0 && leftAtFault > 0) problems.push('nothing was sold while PostgreSQL was away');
    return {
      name: `postgres ${how} mid-sale`,
      history: v.history,
      load,
      sold: v.sold,
      left: v.left,
      problems,
      story:
        `PostgreSQL ${how === 'paused' ? `paused (SIGSTOP) for ${n(outageMs)} ms, past the ${n(STATEMENT_TIMEOUT_MS)} ms statement timeout` : `stopped for ${n(outageMs)} ms and restarted on its data`}; ` +
        `${n(soldDuring)} units sold meanwhile, ${n(fiveXx(load))} × 5xx; ${n(lagAtReturn)} entries unsettled when it came back, ` +
        `0 ${s.drainMs === null ? 'never' : `${n(s.drainMs)} ms after the last answer`}; ${n(s.rows)} orders in PostgreSQL, each once`,
    };
  });
}

/**
 * Redis restarted (SIGTERM, AOF) while entries are pending for the settler: the group,
 * its pending list and the stream come back from the AOF, and settlement goes on where
 * it was; buyers during the outage get 503s that say nothing was written (or that the
 * outcome is unknown), never a lost order.
 */
export function redisRestartedSettling(ctx: Context): Promise<Outcome> {
  return onStage(
    ctx,
    async (stage) => {
      const stock = ctx.quick ? 2_000 : 6_000;
      // A slow settler (one entry per batch): there is always something pending at the restart.
      const app = await stage.start({ SETTLE_BATCH: '1' });
      await stage.startSale(app, stock);
      const first = await stage.load(app, Math.round(stock / 2), 'r1-');
      const lagAtRestart = await unsettled(stage.client, stage.k);
      await stage.redis.stop();
      timeline('redis stopped', `SIGTERM (AOF on) with ${n(lagAtRestart)} entries unsettled`);
      await sleep(1_000);
      const redis = await startPrivateRedis({ appendonly: true, port: stage.redis.port, dir: stage.redis.dir });
      timeline('redis restarted', 'on its data: the stream, the group and its pending list back from the AOF');
      await waitUntil(
        'the app to answer after the restart',
        async () => {
          const res = await request(app.url, 'GET', '/health/ready').catch(() => null);
          return res?.status === 200;
        },
        30_000,
      );
      timeline('app answers again', 'ready after the restart: a second wave buys, the settler goes on where it was');
      const second = await stage.load(app, stock * 2, 'r2-');
      // The settler was given one entry per batch: settle the rest faster now is not needed, it drains.
      const { v, s } = await settledVerdict(
        stage,
        [first, second],
        ['REDIS_UNAVAILABLE', 'OUTCOME_UNKNOWN', 'LOCK_TIMEOUT'],
        120_000,
      );
      const problems = [...v.problems, ...s.problems];
      if (lagAtRestart <= 0) problems.push('nothing was pending at the restart');
      void redis;
      return {
        name: 'redis restarted while settling',
        history: v.history,
        load: v.load,
        sold: v.sold,
        left: v.left,
        problems,
        story:
          `Redis stopped (AOF) with ${n(lagAtRestart)} entries unsettled and restarted 1 s later on its data; ` +
          `the group and its pending list came back with it: ${n(s.rows)} orders in PostgreSQL, each once, ` +
          `settled ${s.drainMs === null ? 'never' : `${n(s.drainMs)} ms after the last answer`}`,
      };
    },
    true,
  );
}

/**
 * Payments racing the deadline on many orders at once, on two apps that both sweep
 * every 10 ms: each order ends paid or expired, exactly one; each answer says which;
 * the stock is exactly the expired units; PostgreSQL agrees.
 */
export function payVersusExpiry(ctx: Context): Promise<Outcome> {
  return onStage(ctx, async (stage) => {
    const orders = ctx.quick ? 200 : 1_000;
    const deadlineMs = 1_500;
    const [a, b] = [await stage.start({ EXPIRY_SWEEP_MS: '10' }), await stage.start({ EXPIRY_SWEEP_MS: '10' })];
    await stage.startSale(a, orders, deadlineMs);
    const load = await stage.load(a, orders, 'v-');
    const ids = [...new Set(load.orderIds)];
    // The load's last order, not when runLoad returned (autocannon takes a while to close).
    const placed = load.startedAt + load.durationMs;
    const answers = await Promise.all(
      ids.map(async (id, i) => {
        // Spread from 1 s before the first deadline to 0.5 s after the last.
        await sleep(Math.max(0, placed + deadlineMs - 1_000 + (1_500 * i) / ids.length - Date.now()));
        return pay(i % 2 ? a.url : b.url, id, `p${i}`, PAYMENT_SECRET);
      }),
    );
    await waitUntil(
      'every reservation paid or expired',
      async () => (await stage.client.zcard(stage.k.deadlines)) === 0,
    );
    const states = await stage.client.hgetall(stage.k.states);
    const problems: string[] = [];
    let paid = 0;
    let expired = 0;
    answers.forEach((res, i) => {
      const s = states[ids[i]]?.[0];
      if (s === 'P') paid++;
      if (s === 'E') expired++;
      if (s === 'P' && res.status !== 200)
        problems.push(`${ids[i]} is paid but its payment was answered ${res.status}`);
      if (s === 'E' && res.body.code !== 'ORDER_EXPIRED')
        problems.push(`${ids[i]} expired but its payment was answered ${res.status}`);
      if (s !== 'P' && s !== 'E') problems.push(`${ids[i]} ended ${s}`);
    });
    const left = Number(await stage.client.get(stage.k.stock));
    if (left !== expired) problems.push(`stock ${left} for ${expired} expired units`);
    const returns = (await stage.client.xrange(stage.k.orders, '-', '+')).filter(([, f]) => f[1] === 'expired').length;
    if (returns !== expired) problems.push(`${returns} expired events for ${expired} expired orders`);
    const s = await settledProblems(stage);
    problems.push(...s.problems);
    const history = await settledHistory(stage, load, s.settled);
    problems.push(...history.problems);
    return {
      name: 'pay racing expiry',
      history: history.line,
      load,
      sold: orders - left,
      left,
      problems: problems.slice(0, 5),
      story:
        `${n(ids.length)} payments sent from 1 s before to 0.5 s after their deadline, two apps sweeping every 10 ms: ` +
        `${n(paid)} paid (200), ${n(expired)} expired (409 ORDER_EXPIRED), each exactly one, each unit back once; ${n(s.rows)} orders in PostgreSQL as Redis has them`,
    };
  });
}

/**
 * The expiry sweeper SIGKILLed between two expiries of one sweep: what it expired stays
 * expired (returned once), the rest is expired by another instance, nothing twice.
 */
export function sweeperKilled(ctx: Context): Promise<Outcome> {
  return onStage(ctx, async (stage) => {
    const orders = ctx.quick ? 100 : 500;
    const deadlineMs = 1_000;
    // The seller never sweeps during the scenario; the victim sweeps every 20 ms and stops mid-sweep.
    const seller = await stage.start({ EXPIRY_SWEEP_MS: '60000' });
    const victim = await stage.start({ EXPIRY_SWEEP_MS: '20', FAULT_STOP_AT: 'sweep-between:1', ALLOW_UNSAFE: '1' });
    await stage.startSale(seller, orders, deadlineMs);
    const load = await stage.load(seller, orders, 's-');
    await waitForStop(victim, 'the sweeper to stop between two expiries');
    const expiredAtStop = await stage.client.zcard(stage.k.deadlines).then((due) => orders - due);
    timeline(
      'sweeper paused',
      `pid ${victim.pid} stopped itself between two expiries, ${n(expiredAtStop)} of ${n(orders)} expired`,
    );
    process.kill(victim.pid, 'SIGKILL');
    timeline('sweeper killed', `SIGKILL pid ${victim.pid} mid-sweep`);
    const rescuer = await stage.start({ EXPIRY_SWEEP_MS: '20' });
    await waitUntil(
      'the rest expired by another instance',
      async () => (await stage.client.zcard(stage.k.deadlines)) === 0,
    );
    timeline('the rest expired', `pid ${rescuer.pid} expired the other ${n(orders - expiredAtStop)}`);
    const left = Number(await stage.client.get(stage.k.stock));
    const returns = (await stage.client.xrange(stage.k.orders, '-', '+')).filter(([, f]) => f[1] === 'expired');
    const problems: string[] = [];
    if (expiredAtStop < 1) problems.push('the sweeper had expired nothing at its stop');
    if (left !== orders) problems.push(`stock ${left} after every order expired, not ${orders}`);
    if (returns.length !== orders || new Set(returns.map(([, f]) => f[3])).size !== orders) {
      problems.push(`${returns.length} expired events for ${orders} orders`);
    }
    const s = await settledProblems(stage);
    problems.push(...s.problems);
    const history = await settledHistory(stage, load, s.settled);
    problems.push(...history.problems);
    return {
      name: 'sweeper killed mid-sweep',
      history: history.line,
      load,
      sold: orders - left,
      left,
      problems,
      story:
        `pid ${victim.pid} stopped after expiring ${n(expiredAtStop)} of ${n(orders)} due reservations; SIGKILL; pid ${rescuer.pid} ` +
        `expired the other ${n(orders - expiredAtStop)}: every unit back once (stock ${n(left)}), ${n(returns.length)} expired events; ` +
        `${n(s.rows)} orders in PostgreSQL, all expired`,
    };
  });
}
