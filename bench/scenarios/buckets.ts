/**
 * --buckets N > 1: the sale's PUT asks for N escrow buckets (src/sale/buckets.ts); with
 * --skew F, that share of the buyers is chosen so their home bucket is bucket 0. After
 * the pass the row reads which buckets the product had and how many moves of rights
 * they received (bench/buckets.ts). Every other check reads the buckets by itself
 * (readSale, the history, settlement): a bucketed sale is judged as one product.
 */
import { productIdOf } from '../../src/redis/key-layout';
import { homeBucket } from '../../src/sale/buckets';
import { bucketKeys, movesInto } from '../buckets';
import { buyerSequence } from '../load';
import { bucketed } from '../rows';
import type { Sale, Scenario } from './scenario';

export function buckets({ run, t, productId }: Sale): Scenario | undefined {
  const count = t.buckets ?? 1;
  if (count <= 1) return undefined;
  const { skew, buyers, duplicates } = run.options;
  return {
    put: bucketed(t),
    ...(skew !== undefined && { userIds: skewedBuyers(buyers, count, skew, duplicates) }),
    async after(load, figures) {
      const keys = await bucketKeys(run.client, t.keys, productId);
      figures.buckets = {
        count: keys.length,
        ids: keys.map((k) => productIdOf(k.meta)!),
        moves: await movesInto(run.client, keys),
        cluster: run.options.cluster !== undefined,
        ...(skew !== undefined && { skew }),
      };
      return load;
    },
  };
}

/**
 * --skew F: `buyers` user ids, the share F of them chosen (`s<i>`, scanned in order)
 * so their home bucket among `buckets` is bucket 0, the rest `b<i>` as every other
 * load names them (whose homes spread evenly); in the order buyerSequence() sends
 * them, duplicates included. The two prefixes keep the groups apart.
 */
export function skewedBuyers(
  buyers: number,
  buckets: number,
  skew: number,
  duplicates: number,
  random = Math.random,
): string[] {
  const hot = Math.round(buyers * skew);
  const ids: string[] = [];
  for (let i = 0; ids.length < hot; i++) if (homeBucket(`s${i}`, buckets) === 0) ids.push(`s${i}`);
  for (let i = 0; ids.length < buyers; i++) ids.push(`b${i}`);
  // The sequence of buyer indexes (prefix ''), each then named.
  return buyerSequence(buyers, duplicates, random, '').map((i) => ids[Number(i)]);
}
