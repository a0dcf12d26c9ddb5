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

/** The tag in `{w:<tag>}` whose slot is `slot`: the first of 0, 1, 2, ... in base 36 (MARK_TAGS were chosen so). */
const tagsOfSlots = new Map<number, string>();
export function tagOfSlot(slot: number): string {
  let tag = tagsOfSlots.get(slot);
  for (let n = 0; tag === undefined; n++) if (calculateSlot(`{w:${n.toString(36)}}`) === slot) tag = n.toString(36);
  tagsOfSlots.set(slot, tag);
  return tag;
}

/**
 * A master's marks: the first of MARK_TAGS whose slot it serves, as the scripts take it
 * (`guess`: its 1-based index); a master that serves none (fewer than 256 slots in a
 * row) gets the tag of its own lowest slot (`guess`: `=<tag>`).
 */
function masterMarks(cluster: Cluster, master: string): { tag: string; guess: string } {
  for (let i = 0; i < MARK_TAGS.length; i++)
    if (masterOf(cluster, markSlot(i)) === master) return { tag: MARK_TAGS[i], guess: String(i + 1) };
  const slots = cluster.slots as (string[] | undefined)[];
  const lowest = slots.findIndex((nodes) => nodes?.[0] === master);
  const tag = tagOfSlot(Math.max(0, lowest));
  return { tag, guess: `=${tag}` };
}

/** Every master in the client's slot map. */
function mastersOf(cluster: Cluster): Set<string> {
  const masters = new Set<string>();
  for (const nodes of cluster.slots as (string[] | undefined)[]) if (nodes?.[0] !== undefined) masters.add(nodes[0]);
  return masters;
}

/**
 * The scripts' guess of a product's shard marks (their ARGV, includes/shard-marks.lua):
 * on a cluster, its master's marks by this client's slot map; `!` on one Redis, where
 * the first tag is always the one and nothing needs probing.
 */
export function markGuess(redis: RedisClient): (productId: string) => string {
  if (!(redis instanceof Cluster)) return () => '!';
  return (productId) => {
    const master = masterOf(redis, calculateSlot(`p:${productId}`));
    return master === undefined ? '' : masterMarks(redis, master).guess;
  };
}

/**
 * The tags whose marks the settler, the sweeper and the lag read: on one Redis, the
 * first; on a cluster, each master's (what the scripts pick on a map that is not
 * stale), or, with `all`, every one of MARK_TAGS besides: a script sent while a tag's
 * slot moved may have marked a tag that is no master's now.
 */
export function markTags(redis: RedisClient, all: boolean): string[] {
  if (!(redis instanceof Cluster)) return [MARK_TAGS[0]];
  const tags = new Set([...mastersOf(redis)].map((master) => masterMarks(redis, master).tag));
  if (all || tags.size === 0) for (const tag of MARK_TAGS) tags.add(tag);
  return [...tags];
}

/** How long after a change of which master serves which marks every tag is read each pass. */
const ALL_AFTER_CHANGE_MS = 30_000;
/** And otherwise, every this many ms: what a script sent on a stale map marked, found. */
const ALL_EVERY_MS = 60_000;

/**
 * A loop's choice of marks to read, pass after pass (markTags): every tag while the
 * masters' marks have changed in the last ALL_AFTER_CHANGE_MS (a slot moved, a
 * failover: what scripts on the old map marked is found at once), and once every
 * ALL_EVERY_MS; else each master's own. One Redis: always its one.
 */
export class MarkReads {
  private layout = '';
  private changedAt = -Infinity;
  private allAt = -Infinity;

  constructor(private readonly redis: RedisClient) {}

  tags(): string[] {
    if (!(this.redis instanceof Cluster)) return markTags(this.redis, false);
    const now = performance.now();
    const own = markTags(this.redis, false);
    const layout = [...mastersOf(this.redis)]
      .map((m) => `${m}=${masterMarks(this.redis as Cluster, m).tag}`)
      .sort()
      .join(' ');
    // The first look is no change (its pass reads every tag anyway: allAt is long past).
    if (layout !== this.layout) {
      if (this.layout !== '') this.changedAt = now;
      this.layout = layout;
    }
    const all = now - this.changedAt < ALL_AFTER_CHANGE_MS || now - this.allAt >= ALL_EVERY_MS;
    if (!all) return own;
    this.allAt = now;
    return markTags(this.redis, true);
  }
}

/**
 * Marks a product's order log for the settler as the scripts do, for entries appended
 * by hand (a tool, a test) on one Redis: without it the settler never looks there.
 */
export function markWritten(redis: Redis, keys: KeyLayout, productId: string): Promise<string> {
  return redis.zincrby(keys.marks(MARK_TAGS[0]).settle, 1, productId);
}

/** A catch that answers `value` for a key of another type (WRONGTYPE), and rethrows anything else. */
function unlessWrongType<T>(value: T): (err: unknown) => T {
  return (err) => {
    if (/^WRONGTYPE/.test((err as Error).message)) return value;
    throw err;
  };
}

/**
 * Whether an order log may hold entries the settle group has not settled: its group has
 * some pending or undelivered (or cannot count them: after a deletion), or, without the
 * group (no settler met it yet), it has any entry.
 */
async function hasUnsettled(redis: RedisClient, stream: string): Promise<boolean> {
  let groups: unknown[][];
  try {
    groups = (await redis.xinfo('GROUPS', stream)) as unknown[][];
  } catch (err) {
    if (/no such key/i.test(String(err))) return false;
    return unlessWrongType(false)(err);
  }
  // The settler's group (SETTLE_GROUP, src/settlement/settler.ts).
  const settle = groups.find((g) => g[1] === 'settle');
  if (!settle) return (await redis.xlen(stream)) > 0;
  const field = (name: string) => settle[settle.indexOf(name) + 1];
  return Number(field('pending')) > 0 || field('lag') !== 0;
}

/** The tag a script takes for a guess when it is served where the guess says (includes/shard-marks.lua). */
function tagOfGuess(guess: string): string {
  if (guess.startsWith('=')) return guess.slice(1);
  if (guess === '!') return MARK_TAGS[0];
  return MARK_TAGS[Math.max(0, Number(guess || 1) - 1)];
}

/**
 * Marks what an instance without the shard marks wrote (an upgrade: an older version's
 * instances sold before this one started, or still sell beside it): every product listed
 * whose order log has entries, and every reservation's deadline. At every start of an
 * instance, so that once the last older instance has stopped, restarting one new
 * instance marks whatever they wrote last (docs/deployment.md). A catalog's length of
 * work, once per start, never when idle. A product already marked is left as it is, and
 * a deadline is a set member: marking again changes nothing; a failure throws, for the
 * caller to try again. Returns the products it marked that were not.
 */
export async function markWhatCameBefore(redis: RedisClient, keys: KeyLayout): Promise<number> {
  const guess = markGuess(redis);
  let marked = 0;
  let cursor = '0';
  do {
    const [next, ids] = await redis.sscan(keys.products, cursor, 'COUNT', 500);
    cursor = next;
    const counts = await Promise.all(
      ids.map(async (productId) => {
        const k = keys.product(productId);
        const marks = keys.marks(tagOfGuess(guess(productId)));
        // A key of another type (no stream, no sorted set) holds nothing to mark.
        const [unsettled, deadlines] = await Promise.all([
          hasUnsettled(redis, k.orders),
          redis.zrangebyscore(k.deadlines, '-inf', '+inf', 'WITHSCORES').catch(unlessWrongType<string[]>([])),
        ]);
        for (let i = 0; i < deadlines.length; i += 2) await redis.zadd(marks.due, deadlines[i + 1], deadlines[i]);
        // NX: a mark there already is the settler's to take off (unmark-1.lua compares its score).
        return unsettled ? await redis.zadd(marks.settle, 'NX', 1, productId) : 0;
      }),
    );
    marked += counts.reduce((n: number, c) => n + c, 0);
  } while (cursor !== '0');
  return marked;
}
