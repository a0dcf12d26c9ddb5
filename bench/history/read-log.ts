/**
 * A product's order stream read as a log (bench/history/history.ts), paged with XRANGE
 * COUNT: never the whole stream in one reply, never KEYS.
 */
import type { Redis } from 'ioredis';
import type { LogEntry } from './history';

/** One stream entry as a log entry; null for an entry that is no order event. */
export function parseEntry(_id: string, _fields: readonly string[]): LogEntry | null {
  throw new Error('not yet');
}

/** The stream's entries in order, `page` at a time. */
export async function* readLog(_redis: Pick<Redis, 'xrange'>, _key: string, _page = 1_000): AsyncGenerator<LogEntry> {
  throw new Error('not yet');
}

/** False when entries were trimmed from the stream's head (XINFO STREAM max-deleted-entry-id); true for no stream. */
export async function logComplete(_redis: Pick<Redis, 'xinfo'>, _key: string): Promise<boolean> {
  throw new Error('not yet');
}
