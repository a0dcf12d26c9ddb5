/**
 * What the audit reads of a product's streams and hashes, each read bounded (PAGE): how
 * much SETTLE_TRIM cut from a log's head, its `settle` group (last delivered, pending),
 * the order states hash records of some orders, and stream ids in Redis's order.
 */
import type { RedisClient } from '../../src/redis/create-client';
import type { ProductKeys } from '../../src/redis/key-layout';
import { SETTLE_GROUP } from '../../src/settlement/settler';

/** Entries, pending ids or hash fields per Redis read. */
export const PAGE = 1_000;

/**
 * How many entries have left the stream's head (XINFO STREAM: added less held), and the
 * first it holds (null for none): every entry before that one is gone.
 */
export async function trimmedSoFar(
  redis: RedisClient,
  stream: string,
): Promise<{ count: number; firstId: string | null } | null> {
  const info = (await redis.xinfo('STREAM', stream)) as unknown[];
  const f = new Map<string, unknown>();
  for (let i = 0; i + 1 < info.length; i += 2) f.set(String(info[i]), info[i + 1]);
  const added = Number(f.get('entries-added'));
  const length = Number(f.get('length'));
  if (!Number.isInteger(added) || !Number.isInteger(length)) return null;
  const firstEntry = f.get('first-entry') as [string, string[]] | null;
  return { count: added - length, firstId: firstEntry ? firstEntry[0] : null };
}

/** Whether the log has the `settle` consumer group: without it the sale is not settled into PostgreSQL. */
export async function hasSettleGroup(redis: RedisClient, stream: string): Promise<boolean> {
  return (await settleGroupFields(redis, stream)) !== null;
}

/** XINFO GROUPS' fields of the log's `settle` group, or null when the log (or the group) is absent. */
async function settleGroupFields(redis: RedisClient, stream: string): Promise<Map<string, unknown> | null> {
  let groups: unknown[][];
  try {
    groups = (await redis.xinfo('GROUPS', stream)) as unknown[][];
  } catch (err) {
    if (/no such key/i.test(String(err))) return null;
    throw err;
  }
  const fields = groups.map((g) => {
    const f = new Map<string, unknown>();
    for (let i = 0; i + 1 < g.length; i += 2) f.set(String(g[i]), g[i + 1]);
    return f;
  });
  return fields.find((f) => f.get('name') === SETTLE_GROUP) ?? null;
}

/** The settle group's last delivered entry and its pending entries' ids, or null when the log has no such group. */
export async function settleGroup(
  redis: RedisClient,
  stream: string,
): Promise<{ lastDelivered: string; pending: Set<string> } | null> {
  const settle = await settleGroupFields(redis, stream);
  if (!settle) return null;
  const pending = new Set<string>();
  // XPENDING's extended form, a page at a time from just after the last id seen.
  for (let from = '-'; ;) {
    const page = (await redis.xpending(stream, SETTLE_GROUP, from, '+', PAGE)) as [string, ...unknown[]][];
    for (const [id] of page) pending.add(id);
    if (page.length < PAGE) break;
    from = `(${page[page.length - 1][0]}`;
  }
  return { lastDelivered: String(settle.get('last-delivered-id')), pending };
}

/**
 * The order states hash records of these orders (absent: Redis's sale does not know it),
 * each looked up in the hash `holder` says keeps it, a page of fields per read.
 */
export async function stateRecords(
  redis: RedisClient,
  holder: (orderId: string) => ProductKeys | null,
  ids: readonly string[],
): Promise<Map<string, string>> {
  const byHash = new Map<string, string[]>();
  for (const id of ids) {
    const hash = holder(id)?.states;
    if (hash !== undefined) byHash.set(hash, [...(byHash.get(hash) ?? []), id]);
  }
  const records = new Map<string, string>();
  for (const [hash, held] of byHash) {
    for (let i = 0; i < held.length; i += PAGE) {
      const page = held.slice(i, i + PAGE);
      const values = await redis.hmget(hash, ...page);
      page.forEach((id, j) => {
        if (values[j] !== null) records.set(id, values[j]);
      });
    }
  }
  return records;
}

/** Stream ids in Redis's order: `<ms>-<seq>`, compared as numbers. */
export function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt);
  const [bm, bs] = b.split('-').map(BigInt);
  return am === bm ? Number(as - bs) : am < bm ? -1 : 1;
}
