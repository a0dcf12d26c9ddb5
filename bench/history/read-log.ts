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

/** The stream's entries in order, `page` at a time (none for no stream). */
export async function* readLog(redis: Pick<Redis, 'xrange'>, key: string, page = 1_000): AsyncGenerator<LogEntry> {
  for (let start = '-'; ;) {
    const entries = await redis.xrange(key, start, '+', 'COUNT', page);
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
 * every bucket's log, bench/buckets.ts), each read `page` at a time and merged as it
 * goes (a k-way merge): by ms, and on equal ms in the order of `keys`, each stream's own
 * entries in its order. The order a concatenation of the logs then a stable sort by ms
 * gives, without every log in memory: one page per stream at most.
 */
export async function* readMergedLog(
  redis: Pick<Redis, 'xrange'>,
  keys: readonly string[],
  page = 1_000,
): AsyncGenerator<MergedEntry> {
  const streams = keys.map((key) => readLog(redis, key, page));
  const heads = await Promise.all(streams.map((s) => s.next()));
  for (;;) {
    let next = -1;
    heads.forEach((head, i) => {
      // Strictly earlier only: a tie stays with the stream that comes first in `keys`.
      if (!head.done && (next < 0 || head.value.ms < (heads[next].value as LogEntry).ms)) next = i;
    });
    if (next < 0) return;
    yield { bucket: next, entry: heads[next].value as LogEntry };
    heads[next] = await streams[next].next();
  }
}
