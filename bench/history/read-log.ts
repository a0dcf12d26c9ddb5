/**
 * A product's order stream read as a log (bench/history/history.ts), paged with XRANGE
 * COUNT: never the whole stream in one reply, never KEYS.
 */
import type { Redis } from 'ioredis';
import type { LogEntry, LogKind } from './history';

/** An entry's `event` field: none for the order's own entry (order-write.lua), else order-outcome-6.lua's. */
const KINDS: Readonly<Record<string, LogKind>> = { paid: 'paid', cancelled: 'cancelled', expired: 'expired' };

/** One stream entry as a log entry; null for an entry that is no order event. */
export function parseEntry(id: string, fields: readonly string[]): LogEntry | null {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]] = fields[i + 1];
  const kind = f.event === undefined ? 'order' : KINDS[f.event];
  if (!kind || f.orderId === undefined || f.userId === undefined) return null;
  return {
    id,
    ms: Number(id.slice(0, id.indexOf('-'))),
    kind,
    orderId: f.orderId,
    userId: f.userId,
    quantity: Number(f.quantity),
  };
}

/** The stream's entries in order, `page` at a time, up to id `end` (none for no stream). */
export async function* readLog(
  redis: Pick<Redis, 'xrange'>,
  key: string,
  page = 1_000,
  end = '+',
): AsyncGenerator<LogEntry> {
  for (let start = '-'; ;) {
    const entries = await redis.xrange(key, start, end, 'COUNT', page);
    for (const [id, fields] of entries) {
      const entry = parseEntry(id, fields);
      if (entry) yield entry;
    }
    if (entries.length < page) return;
    start = `(${entries[entries.length - 1][0]}`;
  }
}

/** Every entry, for a caller that judges a sale it ran (its size is the sale's). */
export async function readWholeLog(redis: Pick<Redis, 'xrange'>, key: string): Promise<LogEntry[]> {
  const log: LogEntry[] = [];
  for await (const e of readLog(redis, key, 10_000)) log.push(e);
  return log;
}

/**
 * False when entries left the stream (SETTLE_TRIM's XTRIM; nothing else deletes one):
 * XINFO STREAM counts every entry ever added (Redis 7), and the stream holds fewer.
 * True for no stream (nothing was ever written). Unknown counts are not a whole log.
 */
export async function logComplete(redis: Pick<Redis, 'xinfo'>, key: string): Promise<boolean> {
  let info: unknown[];
  try {
    info = (await redis.xinfo('STREAM', key)) as unknown[];
  } catch (err) {
    if (/no such key/i.test(String(err))) return true;
    throw err;
  }
  const f = new Map<string, unknown>();
  for (let i = 0; i + 1 < info.length; i += 2) f.set(String(info[i]), info[i + 1]);
  const added = f.get('entries-added');
  return added !== undefined && added !== null && Number(added) === Number(f.get('length'));
}

/** An entry of a merged log, with the index of the stream (bucket) it came from. */
export interface MergedEntry {
  readonly bucket: number;
  readonly entry: LogEntry;
}

/**
 * Several streams' entries as one log on Redis's clock (a product in escrow buckets:
 * every bucket's log, bench/buckets.ts), each read `page` at a time (up to `ends[i]`, if
 * given) and merged as it goes (a k-way merge): by ms, each stream's own entries in its
 * order. Within one ms, entries of different streams have no order Redis can show (each
 * stamps its own): a return (cancelled, expired) is taken before an order, so a unit
 * returned in one bucket and sold again in another, moved, within that ms is never a
 * false oversell; else the order of `keys`. One page per stream in memory at most.
 */
export async function* readMergedLog(
  redis: Pick<Redis, 'xrange'>,
  keys: readonly string[],
  page = 1_000,
  ends?: readonly string[],
): AsyncGenerator<MergedEntry> {
  const streams = keys.map((key, i) => readLog(redis, key, page, ends?.[i]));
  const heads = await Promise.all(streams.map((s) => s.next()));
  const rank = (e: LogEntry) => (e.kind === 'cancelled' || e.kind === 'expired' ? 0 : 1);
  for (;;) {
    let next = -1;
    heads.forEach((head, i) => {
      if (head.done) return;
      if (next < 0) return void (next = i);
      const [a, b] = [head.value, heads[next].value as LogEntry];
      // Strictly before only: otherwise the stream that comes first in `keys` keeps it.
      if (a.ms < b.ms || (a.ms === b.ms && rank(a) < rank(b))) next = i;
    });
    if (next < 0) return;
    yield { bucket: next, entry: heads[next].value as LogEntry };
    heads[next] = await streams[next].next();
  }
}

/**
 * Where to read several streams that are still written (a sale going on) so that what is
 * read is one instant's: each stream's last id now (`ends`, XINFO STREAM's
 * last-generated-id; '0-0' for none), then the earliest entry written after any of them,
 * looked for twice, one pass after the other (`cut`, its ms; Infinity for none). Entries
 * up to `ends` and before `cut` are every stream's entries before that instant: an entry
 * written later, in a stream with none after its end at the second look, comes after the
 * first look ended, after every entry read (each shard's clock taken as one).
 */
export async function consistentCut(
  redis: Pick<Redis, 'xrange' | 'xinfo'>,
  keys: readonly string[],
): Promise<{ ends: string[]; cut: number }> {
  const ends = await Promise.all(keys.map((key) => lastId(redis, key)));
  let cut = Infinity;
  for (let look = 0; look < 2; look++) {
    const after = await Promise.all(keys.map((key, i) => redis.xrange(key, `(${ends[i]}`, '+', 'COUNT', 1)));
    for (const [first] of after) if (first) cut = Math.min(cut, Number(first[0].slice(0, first[0].indexOf('-'))));
  }
  return { ends, cut };
}

/** A stream's last-generated-id ('0-0' for no stream). */
async function lastId(redis: Pick<Redis, 'xinfo'>, key: string): Promise<string> {
  let info: unknown[];
  try {
    info = (await redis.xinfo('STREAM', key)) as unknown[];
  } catch (err) {
    if (/no such key/i.test(String(err))) return '0-0';
    throw err;
  }
  for (let i = 0; i + 1 < info.length; i += 2) if (String(info[i]) === 'last-generated-id') return String(info[i + 1]);
  return '0-0';
}
