import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import calculateSlot from 'cluster-key-slot';
import { Cluster, type Redis } from 'ioredis';
import type { RedisClient } from './create-client';
import type { KeyLayout } from './key-layout';

/**
 * The shard marks' tags, read from includes/shard-marks.lua, their one source: tag i
 * (0-based here, 1-based in Lua) hashes to slot i * 256 (shard-marks.spec.ts checks it).
 */
export const MARK_TAGS: readonly string[] = (() => {
  const lua = readFileSync(join(__dirname, 'scripts', 'includes', 'shard-marks.lua'), 'utf8');
  const table = /local MARK_TAGS = \{([^}]*)\}/.exec(lua)?.[1];
  if (!table) throw new Error('includes/shard-marks.lua: no MARK_TAGS table');
  return [...table.matchAll(/'([^']+)'/g)].map((m) => m[1]);
})();

/** The slot of a MARK_TAGS index, as every tag was chosen. */
export const markSlot = (index: number): number => index * 256;

/** A cluster's master for `slot` in the client's slot map, or undefined while unknown. */
function masterOf(cluster: Cluster, slot: number): string | undefined {
  return (cluster.slots as (string[] | undefined)[])[slot]?.[0];
}

/** The first MARK_TAGS index whose slot `master` serves, or -1 (it serves none of them). */
function firstTagOf(cluster: Cluster, master: string): number {
  for (let i = 0; i < MARK_TAGS.length; i++) if (masterOf(cluster, markSlot(i)) === master) return i;
  return -1;
}

/**
 * The scripts' guess of a product's shard marks (their ARGV, includes/shard-marks.lua):
 * on a cluster, the first tag its master serves by this client's slot map, 1-based; ''
 * on one Redis, where the first tag is always the one.
 */
export function markGuess(redis: RedisClient): (productId: string) => string {
  if (!(redis instanceof Cluster)) return () => '';
  return (productId) => {
    const master = masterOf(redis, calculateSlot(`p:${productId}`));
    const index = master === undefined ? -1 : firstTagOf(redis, master);
    return index < 0 ? '' : String(index + 1);
  };
}

/**
 * The tags whose marks the settler and the sweeper read: on one Redis, the first; on a
 * cluster, each master's first (what the scripts pick on a map that is not stale), or,
 * with `all`, every tag: a script sent on a stale map (a slot moved) may have marked a
 * tag that is no master's first, and a pass over every tag now and then finds it.
 */
export function markTags(redis: RedisClient, all: boolean): string[] {
  if (!(redis instanceof Cluster)) return [MARK_TAGS[0]];
  if (all) return [...MARK_TAGS];
  const masters = new Set((redis.slots as (string[] | undefined)[]).map((nodes) => nodes?.[0]));
  const tags = new Set<string>();
  for (const master of masters) {
    if (master === undefined) continue;
    const index = firstTagOf(redis, master);
    if (index >= 0) tags.add(MARK_TAGS[index]);
  }
  return tags.size > 0 ? [...tags] : [...MARK_TAGS];
}

/**
 * Marks a product's order log for the settler as the scripts do, for entries appended
 * by hand (a tool, a test) on one Redis: without it the settler never looks there.
 */
export function markWritten(redis: Redis, keys: KeyLayout, productId: string): Promise<string> {
  return redis.zincrby(keys.marks(MARK_TAGS[0]).settle, 1, productId);
}

/**
 * Marks what was written before the shard marks existed (an upgrade): every product
 * listed whose order log has entries, and every reservation's deadline, once per prefix
 * (`<prefix>marked`, set after). A catalog's length of work, once, at start-up: without
 * it the loops, which read only the marks, would never settle or expire what an older
 * version left. Run again by two instances at once, it marks twice, which changes
 * nothing (a mark is a hint; a deadline is a set member). Returns the products marked.
 */
export async function markWhatCameBefore(redis: RedisClient, keys: KeyLayout): Promise<number> {
  const done = keys.marked;
  if ((await redis.exists(done)) === 1) return 0;
  const guess = markGuess(redis);
  let marked = 0;
  let cursor = '0';
  do {
    const [next, ids] = await redis.sscan(keys.products, cursor, 'COUNT', 500);
    cursor = next;
    for (const productId of ids) {
      const k = keys.product(productId);
      const marks = keys.marks(MARK_TAGS[Math.max(0, Number(guess(productId) || 1) - 1)]);
      const [entries, deadlines] = await Promise.all([
        redis.xlen(k.orders).catch(() => 0),
        redis.zrangebyscore(k.deadlines, '-inf', '+inf', 'WITHSCORES').catch(() => [] as string[]),
      ]);
      if (entries > 0) {
        await redis.zincrby(marks.settle, 1, productId);
        marked++;
      }
      for (let i = 0; i < deadlines.length; i += 2) await redis.zadd(marks.due, deadlines[i + 1], deadlines[i]);
    }
  } while (cursor !== '0');
  await redis.set(done, '1');
  return marked;
}
