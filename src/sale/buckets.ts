import { createHash } from 'node:crypto';
import calculateSlot from 'cluster-key-slot';

/**
 * Escrow buckets (docs/scaling.md "One product on several shards"): a product sold with
 * `buckets: N` keeps its stock as N buckets, each a sale of its own keys under its own
 * hash tag, so N shards' threads sell one product. Bucket 0 is the product's own keys
 * (`{p:<id>}`); bucket i > 0 is `<id>~<n>`, whose keys are `{p:<id>~<n>}`: `~` is not in
 * ID_PATTERN, so no product id is ever a bucket's. A buyer always buys in one home
 * bucket (homeBucket()), where their count lives; rights to units move between buckets
 * (src/orders/escrow.ts), never the count.
 */
export const BUCKET_SEPARATOR = '~';

/** Buckets a product may have. */
export const MAX_BUCKETS = 16;

/** A bucket id: the product's own id, or `<id>~<n>` (n 1..9999). */
export const BUCKET_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}(?:~[1-9][0-9]{0,3})?$/;

/** The product a bucket id belongs to (the id itself for bucket 0 and for an unbucketed product). */
export function productOfBucket(bucketId: string): string {
  const at = bucketId.indexOf(BUCKET_SEPARATOR);
  return at < 0 ? bucketId : bucketId.slice(0, at);
}

/**
 * The index of `userId`'s home bucket among `n`: the first 32 bits of SHA-1 of the id,
 * mod n. Every instance, the bench (--skew) and the tests compute the same.
 */
export function homeBucket(userId: string, n: number): number {
  if (n <= 1) return 0;
  return parseInt(createHash('sha1').update(userId).digest('hex').slice(0, 8), 16) % n;
}

/** The slot a bucket's keys are in on a cluster (their hash tag `{p:<bucket id>}`). */
export function bucketSlot(bucketId: string): number {
  return calculateSlot(`{p:${bucketId}}`);
}

/**
 * The ids of a product's `n` buckets, placed on distinct masters while there are masters
 * not yet used: bucket 0 is the product's own id (where its slot is); bucket i takes the
 * smallest `<id>~<k>` (k = 1, 2, ...) whose slot `masterOf` puts on a master no earlier
 * bucket is on, and once every master has one, the next k in turn. Without a slot map
 * (one Redis, or `masterOf` says nothing) bucket i is `<id>~<i>`.
 */
export function placeBuckets(productId: string, n: number, masterOf: (slot: number) => string | undefined): string[] {
  const ids = [productId];
  const used = new Set<string | undefined>([masterOf(bucketSlot(productId))]);
  const masters = new Set<string>();
  for (let slot = 0; slot < 16384; slot += 64) {
    const master = masterOf(slot);
    if (master !== undefined) masters.add(master);
  }
  let k = 1;
  while (ids.length < n) {
    if (masters.size === 0) {
      ids.push(`${productId}${BUCKET_SEPARATOR}${ids.length}`);
      continue;
    }
    if ([...masters].every((m) => used.has(m))) used.clear();
    // The search is short: a master with a third of the slots is found within a few k.
    for (; k <= 9999; k++) {
      const id = `${productId}${BUCKET_SEPARATOR}${k}`;
      const master = masterOf(bucketSlot(id));
      if (!used.has(master)) {
        ids.push(id);
        used.add(master);
        k++;
        break;
      }
    }
    if (k > 9999) throw new Error(`no bucket id found for ${productId} on a master not yet used`);
  }
  return ids;
}

/** The `buckets` field of bucket 0's meta: the other buckets' ids, space-separated ('' or absent: one bucket). */
export function bucketsOf(productId: string, field: string | null | undefined): string[] {
  return [productId, ...(field ? field.split(' ') : [])];
}

/**
 * A sale's epoch (meta's `epoch`, the same in every bucket of a product of several; ''
 * for one bucket) is `<list>.<sale>`: the list part names the product's buckets as they
 * were placed, kept by every restart and new only after a DELETE (the buckets are fixed
 * for a product's life); the sale part is new at every PUT. Moves compare whole epochs;
 * a purchase compares the list part with its bucket list's (OrderLine.bucketList): a
 * bucket of the same buckets sells it, whatever restart it is in. A product of one bucket
 * is of list ''. An epoch written by the version before lists (a bare UUID, no '.') names
 * none: null, nothing checked against it (a sale of either version restarted half-way by
 * the other sells on, as it did before lists). Lua's copy: purchase-7.lua.
 */
export function listOf(epoch: string): string | null {
  if (epoch === '') return '';
  const dot = epoch.indexOf('.');
  return dot < 0 ? null : epoch.slice(0, dot);
}

/** A move logged on its source bucket and not closed (move-out-4.lua's `o:<id>` record). */
export interface LoggedMove {
  readonly id: string;
  readonly destination: string;
  readonly units: number;
  /** The sale (epoch) the units left. */
  readonly epoch: string;
}

/**
 * The moves in flight a bucket's moves hash logs: its `o:<transfer id>` fields, each
 * `<destination>|<units>|<epoch>|<at ms>`; its `v` field (the bucket's version) is none.
 * The one reader of the record, for the app's refill and every tool that judges a sale.
 */
export function loggedMoves(moves: Readonly<Record<string, string>>): LoggedMove[] {
  return Object.entries(moves).flatMap(([field, record]) => {
    if (!field.startsWith('o:')) return [];
    const [destination, units, epoch] = record.split('|');
    return [{ id: field.slice(2), destination, units: Number(units), epoch }];
  });
}
