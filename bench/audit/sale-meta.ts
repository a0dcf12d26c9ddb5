/**
 * A product's sale as the audit reads it from its meta hashes: over escrow buckets
 * (src/sale/buckets.ts), every bucket's, their shares of the stock summed; and where each
 * order's state is kept.
 */
import type { RedisClient } from '../../src/redis/create-client';
import type { KeyLayout, ProductKeys } from '../../src/redis/key-layout';
import { productOfOrder } from '../../src/orders/order';
import { bucketsOf } from '../../src/sale/buckets';

/** The product has no sale under the prefix (no meta hash). */
export class NoSaleError extends Error {}

/**
 * A product whose sale the audit cannot judge: a bucket of its escrow buckets with no
 * sale, or buckets in two sales (a PUT or DELETE stopped half-way). Said, and the run is
 * not proven.
 */
export class UnjudgedSaleError extends NoSaleError {}

/** The meta hash fields the audit reads, of each bucket (reset-sale-10.lua writes them). */
const SALE_FIELDS = [
  'initialStock',
  'perUserLimit',
  'startedAt',
  'startedSaleId',
  'saleId',
  'epoch',
  'buckets',
] as const;

/** One bucket of a product's sale: its id and keys (a product of one bucket: its own). */
export interface Bucket {
  readonly id: string;
  readonly k: ProductKeys;
}

/** The sale as its meta hashes say it: over escrow buckets, the buckets' shares summed. */
interface Sale {
  readonly buckets: readonly Bucket[];
  readonly stock: number;
  readonly perUserLimit: number;
  readonly startedAt: number | null;
}

/** A product's bucket ids, bucket 0 (its own id) first: its meta's `buckets` field (bucketsOf()). */
export async function saleBuckets(redis: RedisClient, keys: KeyLayout, productId: string): Promise<string[]> {
  const [others] = await redis.hmget(keys.product(productId).meta, 'buckets');
  return bucketsOf(productId, others);
}

/**
 * The sale's meta, every bucket's. Bucket 0 (the product's own meta) names the others;
 * each is a sale of its own share (`initialStock`), and units move between them, so
 * the product's stock is their sum. A bucket with no meta (a DELETE stopped half-way,
 * keys lost) leaves its share unknown, and buckets of different epochs are in two
 * sales: neither can be judged as one sale, and the audit says so (UnjudgedSaleError)
 * rather than judge part of it.
 */
export async function readSale(redis: RedisClient, keys: KeyLayout, productId: string): Promise<Sale> {
  const own = keys.product(productId);
  const first = await redis.hmget(own.meta, ...SALE_FIELDS);
  const ids = bucketsOf(productId, first[6]);
  const buckets = ids.map((id) => ({ id, k: keys.product(id) }));
  const metas = [first, ...(await Promise.all(buckets.slice(1).map((b) => redis.hmget(b.k.meta, ...SALE_FIELDS))))];
  const shares = metas.map((m) => [Number(m[0]), Number(m[1])]);
  metas.forEach((m, i) => {
    if (m[0] !== null && m[1] !== null && shares[i].every(Number.isInteger)) return;
    if (i === 0) throw new NoSaleError(`no sale of product "${productId}" (no ${own.meta})`);
    throw new UnjudgedSaleError(
      `its bucket ${ids[i]} (of ${ids.length} escrow buckets: ${ids.join(', ')}) has no sale (no ${buckets[i].k.meta}): a DELETE or PUT stopped half-way, or the bucket's keys were lost; its share of the stock is unknown, so the product's log cannot be judged`,
    );
  });
  if (new Set(metas.map((m) => m[5])).size > 1) {
    throw new UnjudgedSaleError(
      `its ${ids.length} escrow buckets (${ids.join(', ')}) are not in one sale (their epochs differ: a PUT stopped half-way, or one going on): judge it again once the PUT is done`,
    );
  }
  // Each bucket's start trusted only as its own sale's (a restart by a version that
  // records no start leaves the last sale's startedAt behind, under an older
  // startedSaleId); the product's only if every bucket's is, the earliest of them.
  const starts = metas.map((m) => (m[2] === null || m[3] === null || m[3] !== m[4] ? null : Number(m[2])));
  return {
    buckets,
    stock: shares.reduce((sum, [stock]) => sum + stock, 0),
    perUserLimit: shares[0][1],
    startedAt: starts.includes(null) ? null : Math.min(...(starts as number[])),
  };
}

/**
 * Where an order's state is kept: a product of one bucket keeps all of them in its own
 * states hash; over escrow buckets, the bucket that sold it (its id names it:
 * productOfOrder()), or none of the product's buckets for an id that names none.
 */
export function holderOf(buckets: readonly Bucket[]): (orderId: string) => ProductKeys | null {
  if (buckets.length === 1) return () => buckets[0].k;
  const byId = new Map(buckets.map((b) => [b.id, b.k]));
  return (orderId) => byId.get(productOfOrder(orderId) ?? '') ?? null;
}
