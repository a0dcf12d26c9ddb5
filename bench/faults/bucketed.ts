import type { Cluster } from 'ioredis';
import { KeyLayout, ProductKeys } from '../../src/redis/key-layout';
import { bucketSlot, bucketsOf, homeBucket, loggedMoves } from '../../src/sale/buckets';
import type { SettledOrder } from '../history/history';
import { unsettled } from '../settled';
import { ClusterStage, ClusterStageOptions, onClusterStage, Timed } from './cluster-stage';
import { failOver, failoverPair } from './graceful-failover';
import { readSettled } from './history-verdict';
import { answered, Context, n, Outcome, PREFIX, PRODUCT, Size, verdict, waitForStop, waitUntil } from './kit';
import { moveSlot } from './slot-moved';

/**
 * One hot product in escrow buckets (src/sale/buckets.ts; docs/scaling.md "One product on
 * several shards") under the cluster's faults: its stock in 3 buckets on the 3 masters,
 * two apps selling it to skewed buyers, so rights move between buckets while the fault
 * happens. Every buyer's home is bucket HOT (9 in 10) or SIDE; none is DRAINED's, so
 * HOT runs dry first and takes rights from the others, and DRAINED's whole share leaves
 * it by moves: each unit it had when the fault began is moved after it (the sale sells
 * out). The apps settle into PostgreSQL: each line is judged as one sale over every
 * bucket (readSale, judgeHistory), PostgreSQL's rows included once every bucket's log
 * is settled (the settled invariant: each order there once, as Redis has it).
 */
const BUCKETS = 3;
const HOT = 0;
const DRAINED = 1;
const SIDE = 2;

const sizeOf = (ctx: Context): Size =>
  ctx.quick ? { buyers: 1_500, stock: 900, connections: 50 } : { buyers: 4_000, stock: 3_000, connections: 100 };

/** Every line's stage: two `fenced` apps, 3 masters, the product in BUCKETS buckets, settled into PostgreSQL. */
const stageOf = (size: Size, more: Partial<ClusterStageOptions> = {}): ClusterStageOptions => ({
  strategy: 'fenced',
  size,
  masters: 3,
  buckets: BUCKETS,
  settle: true,
  ...more,
});

/** `count` buyer ids `<prefix><i>`: 9 in 10 homed in bucket HOT, the rest in SIDE, none in DRAINED (homeBucket()). */
export function skewedBuyers(prefix: string, count: number): string[] {
  const ids: string[] = [];
  for (let i = 0; ids.length < count; i++) {
    const id = `${prefix}${i}`;
    if (homeBucket(id, BUCKETS) === (ids.length % 10 === 9 ? SIDE : HOT)) ids.push(id);
  }
  return ids;
}

interface Bucket {
  readonly id: string;
  readonly k: ProductKeys;
  readonly slot: number;
}

/** The sale's buckets, bucket 0 (the product's own keys) first, as bucket 0's meta lists them. */
async function bucketsOfSale(reader: Cluster): Promise<Bucket[]> {
  const layout = new KeyLayout(PREFIX);
  const ids = bucketsOf(PRODUCT, await reader.hget(layout.product(PRODUCT).meta, 'buckets'));
  if (ids.length !== BUCKETS) throw new Error(`the sale has ${ids.length} buckets, not ${BUCKETS}`);
  return ids.map((id) => ({ id, k: layout.product(id), slot: bucketSlot(id) }));
}

/** What the escrow left once the sale is over, read from every bucket. */
interface Escrow {
  /** `:port`s of the masters serving the buckets when the sale began. */
  readonly placed: string[];
  readonly stock: number[];
  /** Moves logged on a source and not closed. */
  readonly inFlight: number;
  /** Moves HOT took in (its `landed` markers). */
  readonly landed: number;
  /** Orders each bucket's own log holds. */
  readonly orders: number[];
}

async function escrowAtEnd(reader: Cluster, buckets: Bucket[], placed: string[]): Promise<Escrow> {
  const each = (read: (b: Bucket) => Promise<number>) => Promise.all(buckets.map(read));
  const moves = await each(async (b) => loggedMoves(await reader.hgetall(b.k.moves)).length);
  return {
    placed,
    stock: await each(async (b) => Number(await reader.get(b.k.stock))),
    inFlight: moves.reduce((a, b) => a + b, 0),
    landed: await reader.hlen(buckets[HOT].k.landed),
    orders: await each((b) => reader.xlen(b.k.orders)),
  };
}

/** The escrow's promises at the end: buckets on distinct masters, moves made, none in flight, every bucket sold out. */
function escrowChecks(e: Escrow): (() => string | null)[] {
  return [
    () => (new Set(e.placed).size === BUCKETS ? null : `the buckets shared masters: ${e.placed.join(', ')}`),
    () => (e.landed > 0 ? null : 'no move landed in the hot bucket'),
    () => (e.orders[DRAINED] === 0 ? null : `${e.orders[DRAINED]} orders in a bucket no buyer is homed in`),
    () => (e.inFlight === 0 ? null : `${e.inFlight} moves still in flight at the end`),
    () => (e.stock.every((s) => s === 0) ? null : `stock left in the buckets: ${e.stock.join(', ')}`),
  ];
}

const escrowStory = (e: Escrow) =>
  `${BUCKETS} buckets on ${e.placed.join(', ')}; orders per bucket ${e.orders.map(n).join(' / ')}, ` +
  `${n(e.landed)} moves landed in the hot bucket, ${e.inFlight} in flight at the end`;

/** Where each bucket's slot is served now. */
const placement = (stage: ClusterStage, buckets: Bucket[]) =>
  Promise.all(buckets.map(async (b) => `:${(await stage.cluster.masterOfSlot(b.slot)).port}`));

/** PostgreSQL's orders of the product, once settlement has caught up with every bucket's log. */
async function settledOrders(stage: ClusterStage, reader: Cluster, buckets: Bucket[]): Promise<SettledOrder[]> {
  await waitUntil(
    "every bucket's orders settled into PostgreSQL",
    async () => (await Promise.all(buckets.map((b) => unsettled(reader, b.k)))).every((x) => x === 0),
    30_000,
  );
  return readSettled(stage.database!, PRODUCT);
}

/** Every app's load of its own skewed buyers (ids prefixed a0-, a1-). */
const skewedLoads = (stage: ClusterStage) =>
  Promise.all(
    stage.apps.map((app, i) =>
      stage.load(app, stage.size.buyers, `a${i}-`, { userIds: skewedBuyers(`a${i}-`, stage.size.buyers) }),
    ),
  );

/** Orders written in any bucket after `ms` (Redis's clock: every node is a process on this host). */
async function ordersAfter(reader: Cluster, buckets: Bucket[], ms: number): Promise<number> {
  const after = await Promise.all(buckets.map((b) => reader.xrange(b.k.orders, String(ms + 1), '+')));
  return after.reduce((a, x) => a + x.length, 0);
}

/**
 * A planned failover of the master holding bucket DRAINED while two apps sell and rights
 * move out of it: a plain CLUSTER FAILOVER on its replica (graceful-failover.ts), asked
 * once the first units have left the bucket. A move's steps on that shard (out, then
 * done) wait out the pause and hear MOVED after it, like a purchase: no buyer should see
 * a 5xx, and what the bucket still held moves out from the promoted replica.
 */
export function bucketFailover(ctx: Context): Promise<Outcome> {
  const size = sizeOf(ctx);
  return onClusterStage(ctx, stageOf(size, { replicas: 1 }), async (stage) => {
    const reader = stage.reader();
    const buckets = await bucketsOfSale(reader);
    const placed = await placement(stage, buckets);
    const drained = buckets[DRAINED];
    const pair = await failoverPair(stage, drained.slot);
    const share = Number(await pair.from.hget(drained.k.meta, 'initialStock'));
    const loads = skewedLoads(stage);
    await waitUntil(
      `rights to move out of bucket ${drained.id}`,
      async () => Number(await pair.from.get(drained.k.stock)) < share,
    );
    const { askedAt, doneAt } = await failOver(stage, pair, drained.slot);
    // Units no buyer of its own can take: each leaves by a move through the promoted replica.
    const leftAfter = Number(await pair.to.get(drained.k.stock));
    const results = await loads;
    const retries = await stage.retryUnknown(reader);
    const settled = await settledOrders(stage, reader, buckets);
    const end = await escrowAtEnd(reader, buckets, placed);
    const after = await ordersAfter(reader, buckets, doneAt);
    const failed = stage.heard.filter((a) => a.status >= 500);
    const inFlight = stage.heard.filter((a: Timed) => a.sentAt <= doneAt && a.at >= askedAt).length;
    return stage.judge(reader, results, retries, {
      name: `bucketed graceful failover (fenced, ${BUCKETS} buckets, 2 apps)`,
      allowed: [],
      history: { settled },
      story:
        `${escrowStory(end)}; CLUSTER FAILOVER on replica :${pair.replica.port} of :${pair.master.port}, ` +
        `master of bucket ${drained.id}, once units had moved out of it; it served the slot ${n(doneAt - askedAt)} ms ` +
        `after it was asked, with ${n(leftAfter)} of the bucket's ${n(share)} units left, each moved out after; ` +
        `5xx ×${n(failed.length)} of the ${n(inFlight)} buyers in flight during it; ${n(after)} orders written after it`,
      checks: [
        () => (inFlight > 0 ? null : 'no buyer was in flight during the failover'),
        () => (failed.length === 0 ? null : `${failed.length} 5xx during a failover that loses nothing`),
        () => (leftAfter > 0 ? null : `bucket ${drained.id} was dry before its failover: no move met the new master`),
        () => (after > 0 ? null : 'nothing was sold after the failover'),
        ...escrowChecks(end),
      ],
    });
  });
}

/**
 * Bucket HOT's slot migrated to the master of bucket DRAINED while two apps sell
 * (slot-moved.ts's procedure), once a first move has landed in it: every purchase and
 * every landing of rights in HOT meets the split slot (ASK, TRYAGAIN: run nowhere, sent
 * again) or its new master. No buyer should see a 5xx, and each unit DRAINED still held
 * lands in HOT during the move or after it.
 */
export function bucketSlotMoved(ctx: Context): Promise<Outcome> {
  const size = sizeOf(ctx);
  return onClusterStage(ctx, stageOf(size), async (stage) => {
    const reader = stage.reader();
    const buckets = await bucketsOfSale(reader);
    const placed = await placement(stage, buckets);
    const hot = buckets[HOT];
    const source = await stage.cluster.masterOfSlot(hot.slot);
    const target = await stage.cluster.masterOfSlot(buckets[DRAINED].slot);
    const from = stage.node(source);
    const to = stage.node(target);
    const loads = skewedLoads(stage);
    await waitUntil('a first move to land in the hot bucket', async () => (await from.hlen(hot.k.landed)) > 0);
    const landedBefore = await from.hlen(hot.k.landed);
    const others = (await stage.cluster.masters()).filter((m) => m !== source && m !== target);
    const move = await moveSlot(
      hot.slot,
      { node: source, client: from },
      { node: target, client: to },
      others.map((m) => stage.node(m)),
    );
    const results = await loads;
    const retries = await stage.retryUnknown(reader);
    const settled = await settledOrders(stage, reader, buckets);
    const owner = await stage.cluster.masterOfSlot(hot.slot);
    const leftOnSource = Number(await from.cluster('COUNTKEYSINSLOT', hot.slot));
    const end = await escrowAtEnd(reader, buckets, placed);
    const after = await ordersAfter(reader, buckets, move.doneAt);
    const failed = stage.heard.filter((a) => a.status >= 500);
    const inFlight = stage.heard.filter((a) => a.sentAt <= move.doneAt && a.at >= move.startedAt).length;
    const landedSince = end.landed - landedBefore;
    return stage.judge(reader, results, retries, {
      name: `bucketed slot moved (fenced, ${BUCKETS} buckets, 2 apps)`,
      allowed: [],
      history: { settled },
      story:
        `${escrowStory(end)}; the hot bucket's slot ${hot.slot} moved from :${source.port} to :${target.port} ` +
        `after ${n(landedBefore)} moves had landed in it: ${move.keys} keys in ${move.batches} MIGRATEs, ` +
        `buyers met the split slot (ASK ×${n(move.redirects.ASK)}, TRYAGAIN ×${n(move.redirects.TRYAGAIN)}), ` +
        `SETSLOT NODE on every master ${n(move.doneAt - move.startedAt)} ms after IMPORTING; ` +
        `${n(landedSince)} moves landed in it since; 5xx ×${n(failed.length)} of the ${n(inFlight)} buyers in flight ` +
        `during the move; ${n(after)} orders written after it`,
      checks: [
        () => (owner === target ? null : `the slot is served by :${owner.port}, not the target :${target.port}`),
        () => (leftOnSource === 0 ? null : `${leftOnSource} keys of the slot left on the source`),
        () => (move.redirects.ASK + move.redirects.TRYAGAIN > 0 ? null : 'no buyer met the split slot'),
        () => (failed.length === 0 ? null : `${failed.length} 5xx during a slot move that loses nothing`),
        () => (landedSince > 0 ? null : 'no move landed in the hot bucket during or after its slot move'),
        () => (after > 0 ? null : 'nothing was sold after the move'),
        ...escrowChecks(end),
      ],
    });
  });
}

/** A move logged on its source (move-out-4.lua's record `<destination>|<units>|<epoch>|<at>`). */
interface Logged {
  readonly id: string;
  readonly source: Bucket;
  readonly destination: string;
  readonly units: number;
}

async function movesLogged(reader: Cluster, buckets: Bucket[]): Promise<Logged[]> {
  const each = await Promise.all(
    buckets.map(async (source) =>
      loggedMoves(await reader.hgetall(source.k.moves)).map(({ id, destination, units }) => ({
        id,
        source,
        destination,
        units,
      })),
    ),
  );
  return each.flat();
}

/**
 * An app SIGKILLed between a move's steps: the first app sells alone until its fault hook
 * stops it (FAULT_STOP_AT=move-between:1) right after its first move's first step, with
 * the units out of their source, logged there, in no bucket; it is killed there, and only
 * then does the second app's load begin. Its buyers find the move in flight, land it once
 * and sell the rest: every unit sold once, nothing in flight at the end. A named stop
 * point, not a moment, so the move is caught mid-way on every run.
 */
export function bucketMoveKilled(ctx: Context): Promise<Outcome> {
  const size = sizeOf(ctx);
  return onClusterStage(
    ctx,
    stageOf(size, {
      // A lock the killed app held (a purchase of its in flight) expires within the other's
      // wait; what its settler had read and not acknowledged, the other's claims soon.
      env: { LOCK_TTL_MS: '1500', SETTLE_CLAIM_IDLE_MS: '1000' },
      firstEnv: { FAULT_STOP_AT: 'move-between:1', ALLOW_UNSAFE: '1' },
    }),
    async (stage) => {
      const [victim, other] = stage.apps;
      const reader = stage.reader();
      const buckets = await bucketsOfSale(reader);
      const placed = await placement(stage, buckets);
      const stop = new AbortController();
      const victimLoad = stage.load(victim, size.buyers, 'a0-', {
        userIds: skewedBuyers('a0-', size.buyers),
        signal: stop.signal,
      });
      await waitForStop(victim, 'the app to stop between the steps of its first move');
      const flying = await movesLogged(reader, buckets);
      const soldBefore =
        size.stock -
        (await Promise.all(buckets.map((b) => reader.get(b.k.stock)))).reduce(
          (a, s) => a + Number(s),
          flying.reduce((a, m) => a + m.units, 0),
        );
      process.kill(victim.pid, 'SIGKILL');
      stop.abort();
      const [killed, survived] = await Promise.all([
        victimLoad,
        stage.load(other, size.buyers, 'a1-', { userIds: skewedBuyers('a1-', size.buyers) }),
      ]);
      const settled = await settledOrders(stage, reader, buckets);
      const v = await verdict(reader, stage.k, [survived], [killed], [], { history: { start: stage.clock, settled } });
      const end = await escrowAtEnd(reader, buckets, placed);
      const [move] = flying;
      const landedAs =
        move && (await reader.hget(new KeyLayout(PREFIX).product(move.destination).landed, `i:${move.id}`));
      const closed = move && !(await reader.hexists(move.source.k.moves, `o:${move.id}`));
      for (const check of escrowChecks(end)) {
        const broken = check();
        if (broken) v.problems.push(broken);
      }
      if (flying.length !== 1) v.problems.push(`${flying.length} moves in flight when the app stopped, not 1`);
      else if (landedAs !== String(move.units))
        v.problems.push(`the move in flight landed as ${landedAs ?? 'nothing'}, not its ${move.units} units once`);
      else if (!closed) v.problems.push(`the move in flight is still logged on ${move.source.id}`);
      return {
        name: `bucketed app killed mid-move (fenced, ${BUCKETS} buckets, 2 apps)`,
        ...v,
        story:
          `${escrowStory(end)}; pid ${victim.pid} stopped itself between a move's steps after ${n(soldBefore)} sold, ` +
          (move
            ? `${n(move.units)} units out of ${move.source.id} for ${move.destination}, logged on the source only; `
            : 'no move logged; ') +
          `SIGKILL; pid ${other.pid}'s buyers landed it (marker ${landedAs ?? 'none'}) and sold the rest; ` +
          `the killed app had answered ${n(answered(killed))} (${n(killed.status['201'] ?? 0)} × 201) and wrote ${v.unacknowledged} orders it never acknowledged`,
      };
    },
  );
}
