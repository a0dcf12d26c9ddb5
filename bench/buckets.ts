/**
 * --buckets: a row's product sold from escrow buckets (src/sale/buckets.ts, docs/scaling.md
 * "One product on several shards"). The bench reads a bucketed product as the app keeps
 * it: bucket 0 is the product's own keys, its meta's `buckets` field names the others.
 * Every read here names one bucket's keys (one slot), as the bench's other reads do.
 */
import type { Redis } from 'ioredis';
import type { KeyLayout, ProductKeys } from '../src/redis/key-layout';
import { bucketsOf, loggedMoves } from '../src/sale/buckets';
import type { LogEntry } from './history/history';
import { readMergedLog } from './history/read-log';

/** What a bucketed row reports: its buckets and the moves of rights between them. */
export interface BucketFigures {
  /** Buckets of the measured product (1: the product's own keys only). */
  readonly count: number;
  /** Their ids, bucket 0 (the product's id) first. */
  readonly ids: readonly string[];
  /** Moves of rights into its buckets during the row (one field of a bucket's landed hash per move received). */
  readonly moves: number;
  /** False when the run had one Redis server: the buckets were on one thread. */
  readonly cluster: boolean;
  /** --skew: the share of the buyers whose home bucket was bucket 0 by choice. */
  readonly skew?: number;
}

/** Every bucket's keys of `productId`, its own first; one entry for a product without buckets. */
export async function bucketKeys(
  redis: Pick<Redis, 'hmget'>,
  layout: KeyLayout,
  productId: string,
): Promise<ProductKeys[]> {
  const [others] = await redis.hmget(layout.product(productId).meta, 'buckets');
  return bucketsOf(productId, others).map((id) => layout.product(id));
}

/** Units a bucket gave up that have not landed yet, from its moves hash. */
export function unitsInFlight(moves: Readonly<Record<string, string>>): number {
  return loggedMoves(moves).reduce((sum, m) => sum + m.units, 0);
}

/** Units not sold over the buckets: their stock, and what is in flight between them (in no stock, not sold). */
export async function unitsLeft(
  redis: Pick<Redis, 'get' | 'hgetall'>,
  buckets: readonly ProductKeys[],
): Promise<number> {
  const each = await Promise.all(
    buckets.map(async (k) => {
      const [stock, moves] = await Promise.all([redis.get(k.stock), redis.hgetall(k.moves)]);
      return Number(stock ?? 0) + unitsInFlight(moves);
    }),
  );
  return each.reduce((a, b) => a + b, 0);
}

/** Moves the buckets received: the sum of their landed hashes' lengths (move-in-4.lua writes one field per transfer). */
export async function movesInto(redis: Pick<Redis, 'hlen'>, buckets: readonly ProductKeys[]): Promise<number> {
  const each = await Promise.all(buckets.map((k) => redis.hlen(k.landed)));
  return each.reduce((a, b) => a + b, 0);
}

/**
 * A product's order log as the history checker judges it: for a product in escrow
 * buckets, every bucket's log merged on Redis's clock (each shard stamps its own entries;
 * the bench's and the fault suite's shards share this machine's clock), ties in bucket
 * order, each bucket's own entries in their stream's order (readMergedLog(), which
 * `npm run audit` reads too). A buyer's orders are all in their home bucket's log.
 */
export async function mergedLog(redis: Pick<Redis, 'xrange'>, buckets: readonly ProductKeys[]): Promise<LogEntry[]> {
  const log: LogEntry[] = [];
  for await (const { entry } of readMergedLog(
    redis,
    buckets.map((b) => b.orders),
    10_000,
  ))
    log.push(entry);
  return log;
}
