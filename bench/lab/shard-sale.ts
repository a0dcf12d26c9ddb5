/**
 * The lab's shard lessons (docs/scaling.md "One hot product: one slot, one thread" and
 * "One product on several shards"), as a CLI the lab runs like the bench: one product
 * sold on a private Redis Cluster of three masters, its stock in `--buckets` escrow
 * buckets (PUT `buckets: N`), one app, the buyers fired at it. The lab sees where each
 * bucket lives (its slot and master), the sale live, then each bucket's orders, the
 * moves that refilled dry buckets (each bucket's `landed` hash: one field per transfer
 * it took in), each master's share of the Redis CPU, and the verdict read from every
 * bucket (bench/verdict.ts readSale merges them) with the history checker over the
 * merged logs.
 *
 *   npm run lab:shards -- --buckets 3 --buyers 2000 --stock 200
 */
import { mergedLog, unitsInFlight } from '../buckets';
import { Redis } from 'ioredis';
import { parseArgs } from 'node:util';
import { request, startSale } from '../../harness/http';
import { stopAll } from '../../harness/processes';
import { CONFIG_DEFAULTS, LOCK_STRATEGY_NAMES } from '../../src/config/app-config';
import type { ProductBucket } from '../../src/products/product';
import { KeyLayout } from '../../src/redis/key-layout';
import { MAX_BUCKETS } from '../../src/sale/buckets';
import { startMeter } from '../cost';
import { runToExit } from '../entry-point';
import { emit } from '../events';
import { apps, n, saleStarted, timeline, TOKEN, watching } from '../faults/kit';
import { checkHistory, historyLine } from '../history/check';
import { linkClocks, readClock } from '../history/clock';
import { logComplete } from '../history/read-log';
import { runLoad } from '../load';
import type { LoadProgress } from '../progress';
import { connect, startRunRedis } from '../run-redis';
import { judge, readSale } from '../verdict';

/** The masters of the lesson's cluster: three, as docs/scaling.md's "one product on three shards". */
export const SHARD_LESSON_MASTERS = 3;
const PRODUCT = 'phone';
const PREFIX = 'lab:';

export interface ShardSaleOptions {
  readonly buckets: number;
  readonly buyers: number;
  readonly stock: number;
  readonly connections: number;
  readonly strategy: string;
}

export function parseShardSaleArgs(argv: string[]): ShardSaleOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      buckets: { type: 'string', default: '3' },
      buyers: { type: 'string', default: '2000' },
      stock: { type: 'string', default: '200' },
      connections: { type: 'string', default: '50' },
      strategy: { type: 'string', default: CONFIG_DEFAULTS.lockStrategy },
    },
  });
  const int = (name: string, v: string, min: number, max: number) => {
    const x = Number(v);
    if (!/^\d+$/.test(v) || x < min || x > max) throw new Error(`--${name} must be an integer from ${min} to ${max}`);
    return x;
  };
  if (!(LOCK_STRATEGY_NAMES as readonly string[]).includes(values.strategy!)) {
    throw new Error(`--strategy must be one of: ${LOCK_STRATEGY_NAMES.join(', ')}`);
  }
  return {
    buckets: int('buckets', values.buckets!, 1, MAX_BUCKETS),
    buyers: int('buyers', values.buyers!, 1, 1_000_000),
    stock: int('stock', values.stock!, 1, 1_000_000),
    connections: int('connections', values.connections!, 1, 10_000),
    strategy: values.strategy!,
  };
}

const units = (x: number) => `${n(x)} unit${x === 1 ? '' : 's'}`;

/** The transfers a bucket's `landed` hash took in, as their units (a `stale` one was refused: none came). */
const movesIn = (landed: Record<string, string>) =>
  Object.values(landed)
    .filter((v) => v !== 'stale')
    .map(Number);
const unitsIn = (landed: Record<string, string>) => movesIn(landed).reduce((sum, u) => sum + u, 0);

/** The master serving each slot, from CLUSTER SLOTS. */
async function slotMasters(node: Redis): Promise<(slot: number) => string> {
  const ranges = await node.cluster('SLOTS');
  return (slot) => {
    const [, , master] = ranges.find(([from, to]) => slot >= from && slot <= to) ?? [];
    return master ? `${master[0]}:${master[1]}` : '?';
  };
}

export async function shardSale(o: ShardSaleOptions, log: (line: string) => void): Promise<boolean> {
  const name = `${o.strategy}, buckets ${o.buckets}`;
  emit({ type: 'scenario', name });
  const redis = await startRunRedis({ cluster: SHARD_LESSON_MASTERS }, log);
  const { client, meters, close } = connect(redis);
  const admin = new Redis(redis.nodes[0].url);
  try {
    const [app] = await apps(1, o.strategy, { clusterNodes: redis.appEnv.REDIS_CLUSTER_NODES }, { KEY_PREFIX: PREFIX });
    const layout = new KeyLayout(PREFIX);
    await startSale(app.url, TOKEN, PRODUCT, o.stock, 1, undefined, { buckets: o.buckets });
    const bucketsNow = async () =>
      (await request<ProductBucket[]>(app.url, 'GET', `/api/products/${PRODUCT}/buckets`, { token: TOKEN })).body;
    const masterOf = await slotMasters(admin);
    const placed = await bucketsNow();
    const progress: LoadProgress = { done: 0 };
    // Units left over every bucket, those in flight between them included (unitsInFlight),
    // read on each bucket's shard by the client the
    // verdict reads with: the live line's last reading is answered before the verdict's.
    const left = async () => {
      const each = await Promise.all(
        placed.map(async (b) => {
          const k = layout.product(b.id);
          const [stock, moving] = await Promise.all([client.get(k.stock), client.hgetall(k.moves)]);
          return Number(stock) + unitsInFlight(moving);
        }),
      );
      return String(each.reduce((a, b) => a + b, 0));
    };
    const start = await readClock(client);
    const meter = await startMeter(meters, app.pid);
    const load = await watching(
      saleStarted(
        name,
        o.stock,
        o.buyers,
        progress,
        left,
        `${n(o.stock)} units in ${o.buckets} bucket${o.buckets === 1 ? '' : 's'}, ${n(o.buyers)} buyers`,
      ),
      async () => {
        for (const b of placed) {
          timeline(
            `bucket ${b.id}`,
            `slot ${b.slot} on master ${masterOf(b.slot)}, ${n(b.initialStock)} units (its keys' hash tag {p:${b.id}})`,
          );
        }
        return runLoad(
          {
            url: app.url,
            productId: PRODUCT,
            buyers: o.buyers,
            duplicates: 0,
            connections: o.connections,
            quantity: 1,
          },
          progress,
        );
      },
    );
    const after = await bucketsNow();
    const sold = o.stock - Number(await left());
    const cost = await meter.stop(load.sent, async () => sold);
    // Each transfer a bucket took in is one field of its `landed` hash (move-in-4.lua), kept for the product's life.
    const landed = await Promise.all(after.map((b) => client.hgetall(layout.product(b.id).landed)));
    const moves = landed.reduce((sum, h) => sum + movesIn(h).length, 0);
    const moved = landed.reduce((sum, h) => sum + unitsIn(h), 0);
    after.forEach((b, i) => {
      const into = movesIn(landed[i]).length;
      timeline(
        `bucket ${b.id} done`,
        `${n(b.orders)} orders, ${n(b.stock)} left, ${into} move${into === 1 ? '' : 's'} in (${units(unitsIn(landed[i]))})`,
      );
    });
    for (const s of cost.shards) {
      const here = after.filter((b) => masterOf(b.slot) === s.node).map((b) => b.id);
      timeline(
        `shard ${s.node}`,
        `${Math.round(s.share * 100)}% of the Redis CPU, ${s.cpuUsPerSale ?? '-'} µs and ${s.commandsPerSale ?? '-'} commands per unit sold` +
          ` (${here.length > 0 ? `bucket${here.length === 1 ? '' : 's'} ${here.join(', ')}` : 'no bucket'})`,
      );
    }
    const busiest = cost.shards.reduce((a, b) => (b.cpuUs > a.cpuUs ? b : a));
    const ceiling = busiest.cpuUsPerSale ? Math.round(1e6 / busiest.cpuUsPerSale) : null;
    const k = layout.product(PRODUCT);
    const sale = await readSale(client, k);
    const v = judge(sale, load, 1);
    // The history over every bucket's log, merged in Redis's time order (the shards share this machine's clock).
    const merged = await mergedLog(
      client,
      after.map((b) => layout.product(b.id)),
    );
    const complete = await Promise.all(after.map((b) => logComplete(client, layout.product(b.id).orders)));
    const requests = load.requests ?? [];
    const clock = linkClocks(start, await readClock(client));
    const report = checkHistory({
      productId: PRODUCT,
      stock: sale.initialStock,
      perUserLimit: sale.perUserLimit,
      log: merged,
      logComplete: complete.every(Boolean),
      requests,
      clock,
    });
    // Times on the line count from the first request, on Redis's clock (as the fault suite's).
    const history = historyLine(report, Math.round(Math.min(...requests.map((r) => r.sentAt)) + clock.offsetMs));
    const failedChecks = Object.entries(report.checks).filter(([, state]) => state === 'fail');
    const problems = [...v.problems, ...failedChecks.map(([check]) => `history: ${check} failed`)];
    const pass = problems.length === 0;
    const masters = new Set(after.map((b) => masterOf(b.slot))).size;
    const story =
      (o.buckets === 1
        ? `one bucket on one master: ${Math.round(busiest.share * 100)}% of the Redis CPU on ${busiest.node}, `
        : `${o.buckets} buckets on ${masters} masters, ${n(moves)} move${moves === 1 ? '' : 's'} (${units(moved)}) refilling dry buckets; the busiest shard, ${busiest.node}, `) +
      `${busiest.cpuUsPerSale ?? '-'} µs of Redis CPU per unit sold` +
      (ceiling ? `: a ceiling of ${n(ceiling)} sales/s` : '');
    const line =
      `${pass ? 'PASS' : 'FAIL'} ${name}: ${n(load.sent)} requests, ${n(load.status['201'] ?? 0)} × 201, ` +
      `${n(load.codes.SOLD_OUT ?? 0)} × SOLD_OUT, sold ${n(v.sold)}, stock left ${n(v.stockLeft)}, ` +
      `invariants ${pass ? 'hold' : `BROKEN: ${problems.join('; ')}`} — ${story}`;
    process.stdout.write(`${line}; ${history}\n`);
    emit({
      type: 'outcome',
      name,
      pass,
      line,
      problems,
      sold: v.sold,
      left: v.stockLeft,
      oversold: v.oversold,
      story,
      history,
    });
    return pass;
  } finally {
    admin.disconnect();
    await close();
    // The app before its Redis: none is left reconnecting to a cluster that is gone.
    await stopAll();
    await redis.stop();
  }
}

/** Entry point (scripts/shard-sale.js). */
export function cli(): void {
  const log = (line: string) => process.stderr.write(`[shards] ${line}\n`);
  runToExit(async () => ((await shardSale(parseShardSaleArgs(process.argv.slice(2)), log)) ? 0 : 1), {
    failed: (err) => {
      log(`failed: ${err.stack ?? err.message}`);
      return 1;
    },
  });
}
