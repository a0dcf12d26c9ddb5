/**
 * A fault scenario judged as a history (bench/history/): the product's order log read
 * from Redis, every request the scenario's loads sent (a killed app's too: what it never
 * answered is an outcome unknown; a retry with the same Idempotency-Key is a request of
 * its own), both on one time line by Redis's clock read before the sale and again after
 * it, and PostgreSQL's orders where the scenario settles. A scenario fails when a check
 * its promise covers fails or cannot be proven; a lesson (a promise the fault breaks by
 * design) must show as the check it breaks failing, or the line fails.
 */
import type { Redis } from 'ioredis';
import { connectDatabase, readSettled as readSettledRows } from '../audit/settled-orders';
import type { ProductKeys } from '../../src/redis/key-layout';
import { productIdOf } from '../../src/redis/key-layout';
import { bucketsOf } from '../../src/sale/buckets';
import { checkHistory, historyLine } from '../history/check';
import { ClockReading, linkClocks, readClock } from '../history/clock';
import { CHECKS, CheckName, HistoryReport, LogEntry, RequestRecord, SettledOrder } from '../history/history';
import { logComplete } from '../history/read-log';
import { mergedLog } from '../buckets';
import type { LoadResult } from '../load';
import { productLayoutOf } from '../verdict';

/** What a scenario feeds the checker beyond the log, and what its promise covers. */
export interface HistoryFeed {
  /** Redis's clock read before the sale's first request (readClock). */
  readonly start: ClockReading;
  /**
   * Checks that must fail: the lesson of the line (`none`'s or plain `lock`'s oversell
   * shows as its peak above the stock). A lesson the checker does not find fails the line.
   */
  readonly lessons?: readonly CheckName[];
  /**
   * Checks the fault leaves unprovable by design, each with why (e.g. a failover: the log
   * the promoted replica kept is not the one the buyers were answered from). Their
   * "not proven" is reported on the line, not a failure; a "fail" still is one.
   */
  readonly unprovable?: Partial<Record<CheckName, string>>;
  /** Requests sent besides the loads': each retry of an OUTCOME_UNKNOWN with its Idempotency-Key. */
  readonly retries?: readonly RequestRecord[];
  /** PostgreSQL's orders of the product, once settlement drained (readSettled). */
  readonly settled?: readonly SettledOrder[];
}

export interface HistoryVerdict {
  readonly report: HistoryReport;
  /** historyLine(report): the line's history, printed with it. */
  readonly line: string;
  /** Checks the promise covers that failed or could not be proven, and lessons not shown. */
  readonly problems: string[];
}

/** Redis's clock against ours, before the sale: the start of a scenario's time line. */
export const clockAtStart = (client: Pick<Redis, 'time'>): Promise<ClockReading> => readClock(client);

/** Every request of these loads (a killed app's included), in sending order per load. */
export function requestsOf(loads: readonly LoadResult[]): RequestRecord[] {
  const missing = loads.filter((l) => !l.requests).length;
  // A history with holes would judge requests it never saw: refuse it rather than pass it.
  if (missing > 0) throw new Error(`${missing} loads kept no requests: their history cannot be judged`);
  return loads.flatMap((l) => l.requests!);
}

/** What a history is judged on, read from Redis (the client may be a cluster's: no read spans two slots). */
type LogReader = Pick<Redis, 'xrange' | 'xinfo' | 'hmget' | 'time'>;

/**
 * The product's one log and stock: for a product in escrow buckets (src/sale/buckets.ts),
 * every bucket's log merged (mergedLog) and the buckets' shares summed, since a unit sold
 * from any bucket is held of the product's one stock. Complete only if every bucket's log is.
 */
async function productLog(
  client: LogReader,
  k: ProductKeys,
): Promise<{ stock: number; perUserLimit: number; log: LogEntry[]; complete: boolean }> {
  const [perUserLimit, others] = await client.hmget(k.meta, 'perUserLimit', 'buckets');
  const layout = productLayoutOf(k);
  const buckets = bucketsOf(productIdOf(k.meta)!, others).map((id) => layout.product(id));
  const shares = await Promise.all(buckets.map((b) => client.hmget(b.meta, 'initialStock')));
  const complete = await Promise.all(buckets.map((b) => logComplete(client, b.orders)));
  return {
    stock: shares.reduce((sum, [share]) => sum + Number(share), 0),
    perUserLimit: Number(perUserLimit),
    log: await mergedLog(client, buckets),
    complete: complete.every(Boolean),
  };
}

/**
 * Judges the product's history: the log read from `client` (paged; every bucket's, for
 * a product in escrow buckets), `requests` and `feed.retries` (those of other products
 * dropped), the clock linked from `feed.start` to a reading now, and `feed.settled`.
 */
export async function judgeHistory(
  client: LogReader,
  k: ProductKeys,
  requests: readonly RequestRecord[],
  feed: HistoryFeed,
): Promise<HistoryVerdict> {
  const productId = productIdOf(k.meta)!;
  const { stock, perUserLimit, log, complete } = await productLog(client, k);
  // The retries of OUTCOME_UNKNOWN buyers are requests of the sale too: their refusals and 201s are judged.
  const mine = [...requests, ...(feed.retries ?? [])].filter((r) => (r.productId ?? productId) === productId);
  const clock = linkClocks(feed.start, await readClock(client));
  const report = checkHistory({
    productId,
    stock,
    perUserLimit,
    log,
    logComplete: complete,
    requests: mine,
    clock,
    ...(feed.settled && { settled: feed.settled }),
  });
  // Times on the line count from the first request, on Redis's clock.
  const origin =
    mine.length > 0 ? Math.round(mine.reduce((m, r) => Math.min(m, r.sentAt), Infinity) + clock.offsetMs) : undefined;
  return { report, line: historyLine(report, origin), problems: historyProblems(report, feed) };
}

/** What a report breaks of a scenario's promise (see HistoryFeed). */
export function historyProblems(report: HistoryReport, feed: Pick<HistoryFeed, 'lessons' | 'unprovable'>): string[] {
  const problems: string[] = [];
  const first = (check: CheckName) => report.findings.find((f) => f.check === check)?.detail ?? '';
  for (const check of CHECKS) {
    const state = report.checks[check];
    if (feed.lessons?.includes(check)) {
      if (state !== 'fail') problems.push(`history: ${check} ${state}, but its failure is this line's lesson`);
    } else if (state === 'fail') {
      problems.push(`history: ${check} failed ×${report.counts[check]} (${first(check)})`);
    } else if (state === 'not proven' && !feed.unprovable?.[check]) {
      problems.push(`history: ${check} not proven (${report.notProven.join('; ')})`);
    }
  }
  return problems;
}

/** PostgreSQL's `orders` rows of a product, as the checker reads them (the audit's reader, bench/audit/settled-orders.ts). */
export async function readSettled(databaseUrl: string, productId: string): Promise<SettledOrder[]> {
  const db = await connectDatabase(databaseUrl, { write: false });
  try {
    const rows: SettledOrder[] = [];
    for await (const row of readSettledRows(db, productId)) rows.push(row);
    return rows;
  } finally {
    await db.end();
  }
}
