/**
 * What the cluster scenarios share: a private Redis Cluster (harness startPrivateCluster),
 * two apps on it (REDIS_CLUSTER_NODES) selling one product, loads that send an
 * Idempotency-Key per buyer and keep every answer with the moment it came, harness
 * connections to single nodes, and the verdict, read from the master that serves the
 * product's slot once the fault is over.
 */
import calculateSlot from 'cluster-key-slot';
import { Cluster, Redis } from 'ioredis';
import { startSale } from '../../harness/http';
import { startPrivatePostgres } from '../../harness/postgres';
import { RunningApp, stopAll } from '../../harness/processes';
import { ClusterNode, PrivateCluster, PrivateClusterOptions, startPrivateCluster } from '../../harness/redis';
import { KeyLayout, ProductKeys } from '../../src/redis/key-layout';
import type { Answer, LoadOptions, LoadResult } from '../load';
import { readSale, SaleSnapshot } from '../verdict';
import {
  buyersAt,
  answered,
  apps,
  codesSeen,
  Context,
  harnessClient,
  isFiveXxCode,
  merge,
  n,
  Outcome,
  PREFIX,
  PRODUCT,
  Size,
  TOKEN,
} from './kit';
import type { ClockReading } from '../history/clock';
import { clockAtStart, HistoryFeed, judgeHistory, requestsOf } from './history-verdict';
import { Heard, MAX_ANSWER_MS, NOT_WRITTEN, Retries, retryUnknown, WAIT_MS } from './network-stage';

/** An answer, the app that gave it, and when it came (Date.now()). */
export interface Timed extends Heard {
  readonly at: number;
}

/**
 * Where a sale is read from once a fault is over: the master serving the product's slot,
 * or a cluster client, which follows every slot, as a product in escrow buckets needs
 * (its buckets' keys are on several masters).
 */
export type SaleReader = Redis | Cluster;

export interface ClusterStage {
  readonly cluster: PrivateCluster;
  readonly k: ProductKeys;
  /** The product's hash slot: every key of it lives there. */
  readonly slot: number;
  readonly apps: RunningApp[];
  readonly size: Size;
  /** Redis's clock against ours, read before the sale: where its history starts. */
  readonly clock: ClockReading;
  /** The database the apps settle into (options.settle), or undefined. */
  readonly database?: string;
  /** A harness connection to one node (closed when the stage ends). */
  node(node: ClusterNode): Redis;
  /** A harness cluster client (closed when the stage ends): it reads every slot, wherever it is served now. */
  reader(): Cluster;
  /** Every answer so far, in the order they came. */
  readonly heard: Timed[];
  /**
   * A load of `buyers` fresh buyers (ids prefixed) against one app, each with an
   * Idempotency-Key; `more.userIds` names them instead, `more.signal` ends it early.
   */
  load(
    app: RunningApp,
    buyers: number,
    userPrefix: string,
    more?: Pick<LoadOptions, 'userIds' | 'signal'>,
  ): Promise<LoadResult>;
  /** Retries every OUTCOME_UNKNOWN once with its key and body; `master` serves the product now. */
  retryUnknown(master: SaleReader): Promise<Retries>;
  /** The scenario's line, checked against what `master` holds (see `judge` below). */
  judge(master: SaleReader, loads: LoadResult[], retries: Retries, options: ClusterJudgeOptions): Promise<Outcome>;
}

export interface ClusterJudgeOptions {
  readonly name: string;
  readonly story: string;
  /** The 5xx codes the fault may cause. */
  readonly allowed: string[];
  /**
   * Acknowledged orders missing from the stream are the lesson (a failover without
   * WAIT): they must be there, and the line reports them instead of failing on them.
   */
  readonly lostIsTheLesson?: boolean;
  /** Checks of the scenario's own: each returns a broken promise, or null. */
  readonly checks?: ((sale: SaleSnapshot) => string | null)[];
  /** What the history checker is fed and what the line's promise covers (history-verdict.ts); `start` is the stage's. */
  readonly history?: Omit<HistoryFeed, 'start' | 'retries'>;
}

export interface ClusterStageOptions extends PrivateClusterOptions {
  readonly strategy: string;
  readonly size: Size;
  /** More app env (REDIS_WAIT_REPLICAS, LOCK_TTL_MS...). */
  readonly env?: Record<string, string>;
  /** More env for the first app only (a fault hook: FAULT_STOP_AT). */
  readonly firstEnv?: Record<string, string>;
  /** The product's escrow buckets (PUT `buckets`, src/sale/buckets.ts); one by default. */
  readonly buckets?: number;
  /** The apps settle into a private PostgreSQL (DATABASE_URL), stopped with the stage. */
  readonly settle?: boolean;
}

/**
 * Starts the cluster and two apps of `options.strategy` on it, starts the sale, runs
 * `scenario`, and stops everything.
 */
export async function onClusterStage(
  ctx: Context,
  options: ClusterStageOptions,
  scenario: (stage: ClusterStage) => Promise<Outcome>,
): Promise<Outcome> {
  const { strategy, size, env, firstEnv, settle, buckets, ...clusterOptions } = options;
  const cluster = await startPrivateCluster(clusterOptions);
  const clients: (Redis | Cluster)[] = [];
  try {
    const database = settle ? await (await startPrivatePostgres()).createDatabase('faults') : undefined;
    const appEnv = { LOCK_WAIT_MS: String(WAIT_MS), ...(database && { DATABASE_URL: database }), ...env };
    const stageApps = [
      ...(await apps(1, strategy, cluster, { ...appEnv, ...firstEnv })),
      ...(await apps(1, strategy, cluster, appEnv)),
    ];
    await startSale(stageApps[0].url, TOKEN, PRODUCT, size.stock, 1, undefined, buckets ? { buckets } : {});
    const k = new KeyLayout(PREFIX).product(PRODUCT);
    // Redis's clock, from the master serving the product's slot, before the sale: every
    // node is a process on this host, so the master that serves it at the end reads the same clock.
    const first = harnessClient((await cluster.masterOfSlot(calculateSlot(k.stock))).url);
    clients.push(first);
    const clock = await clockAtStart(first);
    const heard: Timed[] = [];
    const retryAnswers: Answer[] = [];
    const stage: ClusterStage = {
      cluster,
      k,
      slot: calculateSlot(k.stock),
      apps: stageApps,
      size,
      clock,
      ...(database && { database }),
      heard,
      node: (node) => {
        const client = harnessClient(node.url);
        clients.push(client);
        return client;
      },
      reader: () => {
        const client = new Cluster(
          cluster.clusterNodes.split(',').map((at) => ({ host: '127.0.0.1', port: Number(at.split(':')[1]) })),
          { redisOptions: { maxRetriesPerRequest: null } },
        );
        client.on('error', () => undefined);
        clients.push(client);
        return client;
      },
      load: (app, buyers, userPrefix, more = {}) =>
        buyersAt(app.url, buyers, size.connections, {
          ...more,
          userPrefix,
          idempotencyKeys: true,
          onAnswer: (answer) => heard.push({ ...answer, url: app.url, at: Date.now() }),
        }),
      retryUnknown: async (master) => {
        const { retries, answers } = await retryUnknown(heard, await readSale(master, k));
        retryAnswers.push(...answers);
        return retries;
      },
      judge: (master, loads, retries, judgeOptions) =>
        judge(ctx, master, k, clock, loads, retries, [...heard, ...retryAnswers], judgeOptions),
    };
    const outcome = await scenario(stage);
    // A load's socket errors mean an app went away: say what it printed last.
    if (outcome.load.errors > 0) for (const app of stageApps) ctx.log(`app pid ${app.pid}:\n${app.tail()}`);
    return outcome;
  } finally {
    // Quit, or drop a connection to a node that is gone.
    await Promise.all(
      clients.map(async (c) => {
        if (c.status === 'ready') await c.quit().catch(() => c.disconnect());
        else c.disconnect();
      }),
    );
    await stopAll();
  }
}

/**
 * The promises, from the master that serves the product after the fault, and from the
 * buyers' answers:
 * - in Redis: stock never below 0 and no more units in orders than the stock; stock
 *   conserved (initial = left + units ordered); the orders stream and the buyers hash
 *   agree buyer by buyer; no buyer above the limit; no orderId twice; sold out;
 * - every 201's orderId (the retries' too) is in the stream, unless losing some is the
 *   lesson, in which case some must be lost; no order for a buyer told nothing was written;
 * - every request answered, none slower than the network scenarios' bound, no 5xx
 *   but the fault's; every OUTCOME_UNKNOWN resolved by its retry.
 */
async function judge(
  ctx: Context,
  master: SaleReader,
  k: ProductKeys,
  clock: ClockReading,
  loads: LoadResult[],
  r: Retries,
  told: readonly Answer[],
  options: ClusterJudgeOptions,
): Promise<Outcome> {
  const load = merge(loads);
  const sale = await readSale(master, k);
  const problems: string[] = [];
  const units = sale.orders.reduce((a, o) => a + o.quantity, 0);
  if (sale.stockLeft < 0 || units > sale.initialStock) {
    problems.push(
      `oversold in Redis: ${units} units in orders for a stock of ${sale.initialStock}, ${sale.stockLeft} left`,
    );
  }
  if (sale.initialStock !== sale.stockLeft + units) {
    problems.push(`stock not conserved: ${sale.initialStock} != ${sale.stockLeft} left + ${units} ordered`);
  }
  const perUser = new Map<string, number>();
  for (const o of sale.orders) perUser.set(o.userId, (perUser.get(o.userId) ?? 0) + o.quantity);
  const disagree = new Set(
    [...perUser.keys(), ...Object.keys(sale.buyers)].filter((u) => (perUser.get(u) ?? 0) !== (sale.buyers[u] ?? 0)),
  );
  if (disagree.size > 0) problems.push(`the buyers hash and the orders stream disagree on ${disagree.size} buyers`);
  const overLimit = [...perUser.values()].filter((u) => u > sale.perUserLimit).length;
  if (overLimit > 0) problems.push(`${overLimit} buyers above the limit of ${sale.perUserLimit}`);
  const inStream = new Set(sale.orders.map((o) => o.orderId));
  if (inStream.size !== sale.orders.length) {
    problems.push(`${sale.orders.length - inStream.size} orders written twice (the same orderId twice in the stream)`);
  }
  if (sale.stockLeft !== 0) problems.push(`undersell: ${sale.stockLeft} left though demand exceeded the stock`);

  const acknowledged = new Set([...load.orderIds, ...r.orderIds]);
  const lost = [...acknowledged].filter((id) => !inStream.has(id)).length;
  if (options.lostIsTheLesson) {
    if (lost === 0) problems.push('no acknowledged order was lost: the lesson was not shown');
  } else if (lost > 0) {
    problems.push(`${lost} acknowledged orders are not in the stream`);
  }
  const byUser = new Map<string, Answer[]>();
  for (const a of told) byUser.set(a.userId, [...(byUser.get(a.userId) ?? []), a]);
  const falseNo = [...perUser.keys()].filter((u) => (byUser.get(u) ?? []).every((a) => NOT_WRITTEN.has(a.code)));
  if (falseNo.length > 0) {
    problems.push(`${falseNo.length} orders written for buyers told nothing was written (e.g. ${falseNo[0]})`);
  }

  for (const l of loads) {
    if (l.errors > 0 || l.timeouts > 0)
      problems.push(`a load left ${l.errors} socket errors and ${l.timeouts} timeouts`);
    if (l.sent !== answered(l) + l.errors + l.timeouts) problems.push('a load left requests unanswered');
  }
  if (load.latency.max > MAX_ANSWER_MS) {
    problems.push(`an answer took ${load.latency.max} ms, more than ${MAX_ANSWER_MS} ms: a hang`);
  }
  const unexpected = Object.entries(load.codes).filter(
    ([code]) => isFiveXxCode(code) && !options.allowed.includes(code),
  );
  if (unexpected.length > 0) problems.push(`unexpected 5xx: ${unexpected.map(([c, x]) => `${c} ×${x}`).join(', ')}`);
  const unresolved = Object.values(r.unresolved).reduce((a, b) => a + b, 0);
  if (ctx.checkRetries && unresolved > 0) {
    problems.push(`retry resolution: ${unresolved} of ${r.retried} OUTCOME_UNKNOWN retries unresolved`);
  }
  for (const check of options.checks ?? []) {
    const broken = check(sale);
    if (broken) problems.push(broken);
  }
  // The log judged is the one the master serving the slot now kept: after a failover
  // without WAIT it lacks acknowledged orders, which the history shows as orders not
  // written once (acknowledged, not in the log): the lesson, required to show.
  const history = await judgeHistory(master, k, requestsOf(loads), {
    ...options.history,
    start: clock,
    retries: r.requests,
    lessons: [...(options.lostIsTheLesson ? (['ordersOnce'] as const) : []), ...(options.history?.lessons ?? [])],
  });
  problems.push(...history.problems);
  const retried =
    r.retried === 0
      ? 'nothing to retry'
      : `retried each once with its key and body: ${n(r.returned)} got their written order back, ${n(r.afresh)} bought afresh` +
        (unresolved > 0 ? `, ${n(unresolved)} unresolved` : '');
  return {
    name: options.name,
    load,
    sold: sale.initialStock - sale.stockLeft,
    left: sale.stockLeft,
    problems,
    history: history.line,
    ...(options.lostIsTheLesson && lost > 0
      ? {
          lesson:
            `"every 201 is in the order log": ${n(lost)} acknowledged orders lost with the master, ` +
            'which asynchronous replication cannot keep (no WAIT)',
        }
      : {}),
    story:
      `${options.story}; ${codesSeen(load, ['OUTCOME_UNKNOWN'])} (${n(r.written)} of them written); ${retried}; ` +
      `${ctx.checkRetries ? 'retry resolution checked' : 'retry resolution not checked (--no-check-retries)'}; ` +
      `slowest answer ${n(load.latency.max)} ms (bound ${n(MAX_ANSWER_MS)})`,
  };
}
