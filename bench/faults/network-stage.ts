/**
 * What the network scenarios share: apps that each reach the suite's private Redis
 * through a TCP proxy of their own (harness/tcp-proxy.ts, the nemesis); loads that
 * send an Idempotency-Key per buyer and keep every answer; the retry of every
 * OUTCOME_UNKNOWN with its key and body; and the verdict, from Redis and from the
 * buyers' answers.
 */
import type { Redis } from 'ioredis';
import { request, startSale } from '../../harness/http';
import type { RunningApp } from '../../harness/processes';
import { startTcpProxy, TcpProxy } from '../../harness/tcp-proxy';
import { COMMAND_TIMEOUT_MS } from '../../src/redis/create-client';
import type { ProductKeys } from '../../src/redis/key-layout';
import { fencedAcquire, fencedWrite, keyedWrite, purchase } from '../../src/redis/lua-scripts';
import type { ClockReading } from '../history/clock';
import type { CheckName } from '../history/history';
import type { Answer, LoadResult } from '../load';
import type { LoadProgress } from '../progress';
import { readSale } from '../verdict';
import {
  apps,
  armed,
  buyersAt,
  codesSeen,
  holderPid,
  Context,
  n,
  onPrivateRedis,
  Outcome,
  PRODUCT,
  saleStarted,
  tallied,
  SaleVerdict,
  timeline,
  TOKEN,
  verdict,
  waitUntil,
  watching,
} from './kit';
import { Heard, ordersByUser, Retries, retryUnknown } from './retry-unknown';

/** The strategies the network scenarios run: the default, the lock-free two, and plain `lock` for its lessons. */
export type NetworkStrategy = 'lock' | 'fenced' | 'atomic' | 'optimistic';

/** Whether a strategy takes a lock (and so has an owner token in `:lock` and a TTL). */
export const takesLock = (strategy: NetworkStrategy) => strategy === 'lock' || strategy === 'fenced';

// ioredis sends command names in lower case, each a RESP bulk string.
const EXEC = '$4\r\nexec\r\n';

/** The request that carries each strategy's write of orders: a fault armed on it hits the write. */
export const WRITE_MARKER: Record<NetworkStrategy, string> = {
  // Every buyer here sends an Idempotency-Key: under `lock` its claim is checked as it
  // is written, by the keyed-write script (a batch without keys is a MULTI/EXEC).
  lock: keyedWrite.sha1,
  fenced: fencedWrite.sha1,
  atomic: purchase.sha1,
  optimistic: EXEC,
};

/** Each strategy's write, in words. */
export const WRITE_NAME: Record<NetworkStrategy, string> = {
  lock: 'keyed-write script',
  fenced: 'fenced-write script',
  atomic: 'purchase script',
  optimistic: 'WATCHed MULTI/EXEC',
};

/**
 * The request that takes the lock (SET NX, or the fenced-acquire script). The
 * lock-free strategies take none: their first request of a purchase stands in (the
 * purchase script itself; WATCH).
 */
export const ACQUIRE_MARKER: Record<NetworkStrategy, string> = {
  lock: '$3\r\nset\r\n',
  fenced: fencedAcquire.sha1,
  atomic: purchase.sha1,
  optimistic: '$5\r\nwatch\r\n',
};

/** The request ACQUIRE_MARKER finds, in words. */
export const ACQUIRE_NAME: Record<NetworkStrategy, string> = {
  lock: 'SET NX',
  fenced: 'fenced-acquire script (SET NX PX and INCR of the fence)',
  atomic: 'purchase script (it takes no lock)',
  optimistic: 'WATCH (it takes no lock)',
};

/**
 * A buyer's wait budget (LOCK_WAIT_MS): longer than the command timeout, so a
 * command that times out is answered as such and not as the buyer's LOCK_TIMEOUT.
 */
export const WAIT_MS = 3_000;

/**
 * No buyer waits past its deadline: it waits for the lock up to its budget, and
 * around that wait are at most five commands, each bounded by the command timeout:
 * the locked read, the write and the lock's release (a buyer is answered after it),
 * and with an Idempotency-Key the claim before and its release after. Plus 3 s of
 * slack for two busy cores.
 */
export const MAX_ANSWER_MS = WAIT_MS + 5 * COMMAND_TIMEOUT_MS + 3_000;

/** 503s that say "nothing was written" or "unknown", the answers a network fault may cause. */
export const NETWORK_503 = [
  'OUTCOME_UNKNOWN',
  'REDIS_UNAVAILABLE',
  'LOCK_TIMEOUT',
  'LOCK_EXPIRED',
  'STALE_LOCK',
  'CONTENTION',
];

/** Answers that say the order was not written and will not be. */
export const NOT_WRITTEN = new Set([
  ...NETWORK_503.filter((c) => c !== 'OUTCOME_UNKNOWN'),
  'SOLD_OUT',
  'INSUFFICIENT_STOCK',
  'LIMIT_REACHED',
]);

export interface NetworkApp {
  readonly app: RunningApp;
  /** The app's own way to Redis: REDIS_URL is this proxy's. */
  readonly proxy: TcpProxy;
}

/** A buyer's answer, and which app gave it (a retry goes back there). */
interface Told extends Answer {
  readonly via: NetworkApp;
}

export { ordersByUser, retryUnknown };
export type { Heard, Retries };

export interface NetworkStage {
  readonly client: Redis;
  readonly k: ProductKeys;
  readonly apps: NetworkApp[];
  /** A load of `buyers` fresh buyers (ids prefixed) against one app, each with an Idempotency-Key. */
  load(target: NetworkApp, buyers: number, userPrefix: string): Promise<LoadResult>;
  /** Answers so far with this code (from `target` only, if given). */
  count(code: string, target?: NetworkApp): number;
  /** Retries every OUTCOME_UNKNOWN once with its key and body; call with the faults healed. */
  retryUnknown(): Promise<Retries>;
  /** The scenario's line, checked (see `judge` below). */
  judge(loads: LoadResult[], retries: Retries, options: JudgeOptions): Promise<Outcome>;
}

export interface JudgeOptions {
  readonly name: string;
  /** What happened, in words; the common figures (OUTCOME_UNKNOWN, retries, slowest answer) are added. */
  readonly story: string;
  /** Plain `lock`'s oversell is the lesson: it must happen, and the line says so. */
  readonly oversellIsTheLesson?: boolean;
  /** Demand exceeded the stock once the fault was over: the sale must sell out. */
  readonly soldOut?: boolean;
  /** Checks of the scenario's own: each returns a broken promise, or null. */
  readonly checks?: ((v: SaleVerdict) => string | null)[];
  /** History checks whose failure is the line's lesson (beside `oversell` when oversellIsTheLesson). */
  readonly lessons?: readonly CheckName[];
}

export interface StageOptions {
  readonly apps: 1 | 2;
  readonly ttlMs: number;
  readonly stock: number;
}

/**
 * Starts Redis, one proxy and one app per `options.apps`, buys one unit of a warm-up
 * product through each app (so every script the strategy runs is cached in Redis and
 * each app's connections are up: an armed marker then hits the request itself, not a
 * NOSCRIPT round), starts the sale, runs `scenario`, and stops everything.
 */
export async function onNetworkStage(
  ctx: Context,
  strategy: NetworkStrategy,
  options: StageOptions,
  scenario: (stage: NetworkStage) => Promise<Outcome>,
): Promise<Outcome> {
  const proxies: TcpProxy[] = [];
  const closeProxies = () => Promise.all(proxies.map((p) => p.close()));
  return onPrivateRedis(
    async ({ redis, client, k, clock }) => {
      const env = { LOCK_TTL_MS: String(options.ttlMs), LOCK_WAIT_MS: String(WAIT_MS) };
      const stageApps: NetworkApp[] = [];
      for (let i = 0; i < options.apps; i++) {
        const proxy = await startTcpProxy({ port: redis.port });
        proxies.push(proxy);
        const [app] = await apps(1, strategy, proxy.url, env);
        stageApps.push({ app, proxy });
      }
      await startSale(stageApps[0].app.url, TOKEN, 'warm-up', stageApps.length, 1);
      for (const [i, { app }] of stageApps.entries()) {
        const warm = await request(app.url, 'POST', '/api/orders', { json: { productId: 'warm-up', userId: `w${i}` } });
        if (warm.status !== 201) throw new Error(`warm-up purchase: ${warm.status} ${JSON.stringify(warm.body)}`);
      }
      await startSale(stageApps[0].app.url, TOKEN, PRODUCT, options.stock, 1);
      // Every load's answers, for the lab's live line (nothing without it).
      const progress: LoadProgress = { done: 0 };
      const watch = saleStarted(
        `${strategy}, ${stageApps.length} app${stageApps.length === 1 ? '' : 's'}`,
        options.stock,
        0,
        progress,
        () => client.get(k.stock),
        `${n(options.stock)} units, ${stageApps.map(({ app }, i) => `app ${'AB'[i]} (pid ${app.pid})`).join(' and ')}` +
          (stageApps.length === 1
            ? ', talking to Redis through a TCP proxy'
            : ', each talking to Redis through a TCP proxy of its own'),
      );
      return watching(watch, () => scenario(stage(ctx, client, k, clock, stageApps, progress)));
    },
    {},
    closeProxies,
  );
}

function stage(
  ctx: Context,
  client: Redis,
  k: ProductKeys,
  clock: ClockReading,
  stageApps: NetworkApp[],
  progress: LoadProgress,
): NetworkStage {
  const told: Told[] = [];
  const retryAnswers: Answer[] = [];

  return {
    client,
    k,
    apps: stageApps,
    load: (target, buyers, userPrefix) =>
      buyersAt(
        target.app.url,
        buyers,
        Math.min(buyers, 20),
        { userPrefix, idempotencyKeys: true, onAnswer: (answer) => told.push({ ...answer, via: target }) },
        progress,
      ),
    count: (code, target) => told.filter((t) => t.code === code && (!target || t.via === target)).length,

    async retryUnknown() {
      const { retries, answers } = await retryUnknown(
        told.map((t) => ({ ...t, url: t.via.app.url })),
        await readSale(client, k),
      );
      retryAnswers.push(...answers);
      return retries;
    },

    async judge(loads, r, options) {
      const v = await verdict(client, k, loads, [], NETWORK_503, {
        soldOut: options.soldOut ?? false,
        maxAnswerMs: MAX_ANSWER_MS,
        oversellIsTheLesson: options.oversellIsTheLesson,
        history: { start: clock, retries: r.requests, lessons: options.lessons },
      });
      const sale = await readSale(client, k);
      const byUser = ordersByUser(sale);
      const inStream = new Set(sale.orders.map((o) => o.orderId));
      // Every 201, the retries' too, is an order in the stream (verdict checked the loads').
      const missing = r.orderIds.filter((id) => !inStream.has(id)).length;
      if (missing > 0) v.problems.push(`${missing} orders acknowledged to a retry are not in the stream`);
      // Every order is of one unit: as many stream entries as units sold.
      if (sale.orders.length !== sale.initialStock - sale.stockLeft) {
        v.problems.push(
          `${sale.orders.length} orders in the stream, but ${sale.initialStock - sale.stockLeft} units sold`,
        );
      }
      // An order belongs to a buyer told 201 or OUTCOME_UNKNOWN: never to one told
      // that nothing was written (a 503 that says so, or a refusal), nor to one told nothing.
      const answersOf = new Map<string, Answer[]>();
      for (const a of [...told, ...retryAnswers]) answersOf.set(a.userId, [...(answersOf.get(a.userId) ?? []), a]);
      const falseNo = [...byUser.keys()].filter((user) =>
        (answersOf.get(user) ?? []).every((a) => NOT_WRITTEN.has(a.code)),
      );
      if (falseNo.length > 0) {
        v.problems.push(`${falseNo.length} orders written for buyers told nothing was written (e.g. ${falseNo[0]})`);
      }
      // No Idempotency-Key answered with two different orders.
      const perKey = new Map<string, Set<string>>();
      for (const a of [...told, ...retryAnswers]) {
        if (a.idempotencyKey && a.orderId)
          perKey.set(a.idempotencyKey, (perKey.get(a.idempotencyKey) ?? new Set()).add(a.orderId));
      }
      const twoOrders = [...perKey.values()].filter((ids) => ids.size > 1).length;
      if (twoOrders > 0) v.problems.push(`${twoOrders} Idempotency-Keys answered with two different orders`);
      const unresolved = Object.values(r.unresolved).reduce((a, b) => a + b, 0);
      if (ctx.checkRetries && unresolved > 0) {
        v.problems.push(
          `retry resolution: ${unresolved} of ${r.retried} OUTCOME_UNKNOWN retries unresolved (${tallied(r.unresolved)})`,
        );
      }
      if (options.oversellIsTheLesson && v.oversold === 0)
        v.problems.push('the late write did not oversell: the lesson was not shown');
      for (const check of options.checks ?? []) {
        const broken = check(v);
        if (broken) v.problems.push(broken);
      }
      return { name: options.name, ...v, story: `${options.story}; ${common(v, r, unresolved, ctx.checkRetries)}` };
    },
  };
}

/** The figures every network line ends with. */
function common(v: SaleVerdict, r: Retries, unresolved: number, checked: boolean): string {
  const retried =
    r.retried === 0
      ? 'nothing to retry'
      : `retried each once with its key and body: ${n(r.returned)} got their written order back, ${n(r.afresh)} bought afresh` +
        (unresolved > 0 ? `, ${n(unresolved)} unresolved (${tallied(r.unresolved)})` : '') +
        (r.waitedInFlight > 0 ? `, ${n(r.waitedInFlight)} first told IDEMPOTENCY_KEY_IN_USE` : '');
  const resolution = checked ? 'retry resolution checked' : 'retry resolution not checked (--no-check-retries)';
  return (
    `${codesSeen(v.load, ['OUTCOME_UNKNOWN'])} (${n(r.written)} of them written); ${retried}; ${resolution}; ` +
    `slowest answer ${n(v.load.latency.max)} ms (bound ${n(MAX_ANSWER_MS)})`
  );
}

/**
 * The start of a late-write scenario on a two-app stage: app A's first write (and what
 * A's connection sends after it) held in its proxy while A's buyers load; the pid
 * holding the lock and the stock left at that moment.
 */
export async function holdFirstWriteOfA(stage: NetworkStage, strategy: NetworkStrategy, aBuyers: number) {
  const { client, k } = stage;
  const [a, b] = stage.apps;
  const held = armed(a.proxy.holdRequest(WRITE_MARKER[strategy]));
  const aLoading = stage.load(a, aBuyers, 'a-');
  await waitUntil("app A's write to be held", async () => held.fired());
  const holder = takesLock(strategy) ? await holderPid(client, k) : null;
  const stockAtHold = Number(await client.get(k.stock));
  timeline(
    "app A's write held in the network",
    `its first write (${WRITE_NAME[strategy]}) held in its proxy, and all its connection sends after it` +
      (holder === null ? '' : `; the lock held by pid ${holder}`) +
      `; ${n(stockAtHold)} units left`,
  );
  /** A check: under a lock, the held write's app held it. */
  const heldByA = (role: string) => () =>
    holder === null || holder === a.app.pid
      ? null
      : `the lock was held by pid ${holder}, not by the ${role} app ${a.app.pid}`;
  return { a, b, held, aLoading, stockAtHold, heldByA };
}
