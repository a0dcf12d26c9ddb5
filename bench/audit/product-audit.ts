/**
 * One product's audit: its order log judged at every instant (bench/history's LogCheck,
 * fed a page at a time), and, with PostgreSQL, PostgreSQL against Redis as a total queue
 * (checkTotalQueue), each read bounded. A product in escrow buckets (src/sale/buckets.ts)
 * is judged as one sale: every bucket's log merged on Redis's clock against the sum of
 * the buckets' stocks, its settle groups and order states read bucket by bucket.
 */
import type { Client } from 'pg';
import type { RedisClient } from '../../src/redis/create-client';
import type { KeyLayout, ProductKeys } from '../../src/redis/key-layout';
import { productOfOrder } from '../../src/orders/order';
import { checkTotalQueue, LogCheck, type OrderState } from '../history/check';
import type { CheckState, Finding, HistoryReport, LogEntry, SettledOrder } from '../history/history';
import { consistentCut, logComplete, type MergedEntry, readMergedLog } from '../history/read-log';
import { holderOf, readSale } from './sale-meta';
import { readSettled, readSettledEntries, settledNow } from './settled-orders';
import { compareIds, PAGE, settleGroup, stateRecords, trimmedSoFar } from './stream-reads';

export interface ProductAudit {
  /**
   * The buckets judged as the product's sale, bucket 0 (the product's own id) first: one
   * for a product sold from one shard, its escrow buckets' ids for one of several.
   */
  readonly buckets: readonly string[];
  /** The log's checks, and Redis against PostgreSQL (totalQueue) when --database was given. */
  readonly report: HistoryReport;
  readonly perUserLimit: number;
  readonly log: {
    readonly entries: number;
    /** The first and last entries read (stream ids); null for an empty log. */
    readonly first: string | null;
    readonly last: string | null;
    /** Entries of the head trimmed from the stream (SETTLE_TRIM), rebuilt from PostgreSQL and judged before it. */
    readonly fromDatabase: number;
    /** False when the stream's head was trimmed (SETTLE_TRIM) and not rebuilt whole. */
    readonly complete: boolean;
    /**
     * Over escrow buckets, a sale going on while they were read: the instant (ms, Redis's
     * clock) every log was judged up to (consistentCut()), and the entries from then on,
     * not judged; null and 0 when none was written meanwhile.
     */
    readonly cut: number | null;
    readonly beyond: number;
  };
  /** What PostgreSQL held, and what of it was not judged and why; null without --database. */
  readonly settled: SettledSide | null;
  /**
   * Every total-queue finding (the report keeps the first few of each check): each is an
   * order someone must settle by hand, so the audit names them all.
   */
  readonly totalQueue: readonly Finding[];
}

export interface SettledSide {
  /** The product's rows in `orders`. */
  readonly rows: number;
  /**
   * Rows of an earlier sale of the same product id: unknown to this sale's Redis (not in
   * its log, not in its order states hash), final (a sale restarts only once every order
   * is paid, cancelled or expired: reset-sale-10.lua), and created before the sale
   * started (its meta's startedAt, Redis's clock). A restart deletes the log, not
   * PostgreSQL's rows. Not judged.
   */
  readonly earlierSales: number;
  /**
   * The sale's start (meta startedAt, ms on Redis's clock; over escrow buckets, the
   * earliest of theirs, trusted only if every bucket's is its own), or null for a sale
   * started by a version that did not record it: then a row is an earlier sale's when it is older
   * than the log's first entry, which a log that lost its head cannot tell apart from an
   * order Redis lost, so any row set aside leaves the check not proven.
   */
  readonly startedAt: number | null;
  /** Orders with an entry the settle group has not settled yet (pending, or not delivered): not judged. */
  readonly unsettled: readonly string[];
  /** Rows of orders written after the audit read the log (a sale going on): not judged. */
  readonly afterRead: number;
  /** Whether the log has the `settle` consumer group: without it the sale is not settled into PostgreSQL. */
  readonly grouped: boolean;
  /** Orders the log has, settled by the group, that PostgreSQL has no row of: what --repair writes. */
  readonly missing: readonly string[];
}

const STATUS = { R: 'reserved', P: 'paid', C: 'cancelled', E: 'expired' } as const;

export { NoSaleError, UnjudgedSaleError, saleBuckets } from './sale-meta';

export async function auditProduct(
  redis: RedisClient,
  db: Client | null,
  productId: string,
  keys: KeyLayout,
): Promise<ProductAudit> {
  const { buckets, stock, perUserLimit, startedAt } = await readSale(redis, keys, productId);
  const k = buckets[0].k;
  // The settle groups before the logs: an entry a group has acknowledged by now is in
  // PostgreSQL (the settler commits before XACK), and one written later is after its last delivered.
  const groups = db ? await Promise.all(buckets.map((b) => settleGroup(redis, b.k.orders))) : null;
  const trimmedBuckets: string[] = [];
  for (const b of buckets) if (!(await logComplete(redis, b.k.orders))) trimmedBuckets.push(b.id);
  const whole = trimmedBuckets.length === 0;
  // A trimmed head is rebuilt from PostgreSQL for a product of one bucket only (below).
  const trimmed = whole || !db || buckets.length > 1 ? null : await trimmedSoFar(redis, k.orders);
  // The first page of each log read (and held) before PostgreSQL is asked for what
  // precedes it: entries trimmed meanwhile are still in that page, never in neither.
  // Over buckets, every log read to one instant (consistentCut()): a sale going on adds
  // entries while one bucket is read after another, and a unit returned in a bucket read
  // first, then sold in one read later, would be held twice.
  const logs = buckets.map((b) => b.k.orders);
  const { ends, cut } = buckets.length > 1 ? await consistentCut(redis, logs) : { ends: undefined, cut: Infinity };
  const stream = readMergedLog(redis, logs, PAGE, ends);
  const opening = await stream.next();
  // The head fed into a check that takes the log as whole: dropped for one that does not
  // if PostgreSQL cannot give all of it.
  let check = new LogCheck(stock, perUserLimit, whole || trimmed !== null);
  const rebuilt =
    trimmed && db
      ? await rebuildHead(redis, db, productId, k, trimmed, opening.done ? null : opening.value.entry.id, check)
      : null;
  const complete = whole || rebuilt?.whole === true;
  if (!complete && trimmed !== null) check = new LogCheck(stock, perUserLimit, false);
  let first: LogEntry | null = rebuilt?.whole ? rebuilt.first : null;
  const unsettled = new Set<string>();
  // Orders of a log without the settle group (a bucket's, or the product's) were never
  // settled into PostgreSQL: not judged against it, and the check is not proven.
  const ungroupedOrders = new Set<string>();
  let last: LogEntry | null = rebuilt?.whole ? rebuilt.last : null;
  // Each bucket's last entry judged: its rows written later are after the read.
  const lastOf: (LogEntry | null)[] = buckets.map(() => null);
  let entries = 0;
  let beyond = 0;
  const judge = ({ bucket, entry }: MergedEntry) => {
    if (entry.ms >= cut) return void beyond++;
    check.add(entry);
    first ??= entry;
    last = entry;
    lastOf[bucket] = entry;
    entries++;
    if (!groups) return;
    const group = groups[bucket];
    if (!group) ungroupedOrders.add(entry.orderId);
    else if (compareIds(entry.id, group.lastDelivered) > 0 || group.pending.has(entry.id)) unsettled.add(entry.orderId);
  };
  if (!opening.done) judge(opening.value);
  for await (const entry of stream) judge(entry);
  const log = {
    entries,
    fromDatabase: rebuilt?.whole ? rebuilt.entries : 0,
    first: (first as LogEntry | null)?.id ?? null,
    last: (last as LogEntry | null)?.id ?? null,
    complete,
    cut: beyond > 0 ? cut : null,
    beyond,
  };
  const notProven = rebuilt && !rebuilt.whole ? [rebuilt.why] : [];
  if (!whole && buckets.length > 1) {
    notProven.push(
      `${trimmedBuckets.length === 1 ? 'the log of bucket' : 'the logs of buckets'} ${trimmedBuckets.join(', ')} (of ${buckets.length} escrow buckets) ${trimmedBuckets.length === 1 ? 'was' : 'were'} trimmed (SETTLE_TRIM), and the audit does not rebuild a bucketed product's head from PostgreSQL: the merged log was judged as it is, a part of the sale`,
    );
  }
  const ids = buckets.map((b) => b.id);
  if (!db)
    return {
      buckets: ids,
      report: check.report(productId, { notProven }),
      perUserLimit,
      log,
      settled: null,
      totalQueue: [],
    };
  const ungrouped = buckets.filter((_, i) => !groups?.[i]).map((b) => b.id);
  const bucketOf = new Map(buckets.map((b, i) => [b.id, i]));
  const { findings, side } = await totalQueue(redis, db, productId, holderOf(buckets), check.states, {
    first,
    // One bucket: the log's last (its rebuilt head's, if nothing followed); over buckets,
    // the order's own bucket's (none read: null, as for an empty log).
    lastOf: (orderId) =>
      buckets.length === 1 ? last : (lastOf[bucketOf.get(productOfOrder(orderId) ?? '') ?? -1] ?? null),
    complete,
    unsettled,
    ungroupedOrders,
    grouped: ungrouped.length === 0,
    startedAt,
  });
  const queue = totalQueueState(findings, side, entries, buckets.length > 1 ? ungrouped : []);
  return {
    buckets: ids,
    report: check.report(productId, {
      findings,
      checks: { totalQueue: queue.state },
      notProven: [...notProven, ...queue.notProven],
    }),
    perUserLimit,
    log,
    settled: side,
    totalQueue: findings,
  };
}

/**
 * PostgreSQL against the log: rows paged in, the rows and orders that cannot be judged
 * set aside (an earlier sale's, what is not settled yet, what was written after the log
 * was read), then checkTotalQueue; what it names is looked at once more, in Redis's order
 * states hash and in PostgreSQL, so that an order paid or expired while the audit read
 * (a sale going on) is not taken for a status that drifted.
 */
async function totalQueue(
  redis: RedisClient,
  db: Client,
  productId: string,
  holder: (orderId: string) => ProductKeys | null,
  logStates: ReadonlyMap<string, OrderState>,
  read: {
    first: LogEntry | null;
    /** The last entry judged of the log that holds this order (its bucket's). */
    lastOf: (orderId: string) => LogEntry | null;
    complete: boolean;
    unsettled: ReadonlySet<string>;
    /** Orders of a log without the settle group: never settled, not judged. */
    ungroupedOrders: ReadonlySet<string>;
    grouped: boolean;
    startedAt: number | null;
  },
): Promise<{ findings: Finding[]; side: SettledSide }> {
  const rows: SettledOrder[] = [];
  for await (const row of readSettled(db, productId)) rows.push(row);
  const states = new Map(logStates);
  const unjudged = (id: string) => read.unsettled.has(id) || read.ungroupedOrders.has(id);
  for (const id of [...read.unsettled, ...read.ungroupedOrders]) states.delete(id);
  const unknown = rows.filter((r) => !logStates.has(r.orderId));
  const records = await stateRecords(
    redis,
    holder,
    unknown.map((r) => r.orderId),
  );
  let earlierSales = 0;
  let afterRead = 0;
  const judged: SettledOrder[] = [];
  for (const row of rows) {
    if (unjudged(row.orderId)) continue;
    if (logStates.has(row.orderId)) {
      judged.push(row);
      continue;
    }
    const record = records.get(row.orderId);
    if (record) {
      // This sale's order, not in the log as read: written after the read, or trimmed
      // from the log's head (settled before it was trimmed): judged by its state in Redis.
      const last = read.lastOf(row.orderId);
      if (last ? row.createdMs > last.ms : read.complete) afterRead++;
      else {
        states.set(row.orderId, stateOf(record, row.createdMs));
        judged.push(row);
      }
    } else if (row.status !== 'reserved' && row.createdMs < (read.startedAt ?? read.first?.ms ?? Infinity))
      earlierSales++;
    else judged.push(row);
  }
  let findings = checkTotalQueue(states, judged);
  const named = [...new Set(findings.flatMap((f) => f.orderIds))];
  if (named.length > 0) {
    // A second look at what was found: Redis's states first, then PostgreSQL (which the
    // settler writes after Redis), so a change made meanwhile is seen on both sides.
    const now = await stateRecords(redis, holder, named);
    for (const [id, record] of now) {
      const state = states.get(id);
      if (state) states.set(id, stateOf(record, state.ms));
    }
    const fresh = new Map((await settledNow(db, productId, named)).map((r) => [r.orderId, r]));
    const again = judged.map((r) => fresh.get(r.orderId) ?? r);
    findings = checkTotalQueue(states, again);
  }
  const inDatabase = new Set(judged.map((r) => r.orderId));
  return {
    findings,
    side: {
      rows: rows.length,
      earlierSales,
      startedAt: read.startedAt,
      unsettled: [...read.unsettled],
      afterRead,
      grouped: read.grouped,
      // Without the group nothing was settled: PostgreSQL lacks nothing it was told of.
      missing: read.grouped ? [...states.keys()].filter((id) => !inDatabase.has(id)) : [],
    },
  };
}

/** The total-queue check's state: what it found, or why what it did not find proves nothing. */
function totalQueueState(
  findings: readonly Finding[],
  side: SettledSide,
  entries: number,
  /** Over escrow buckets, those whose log has no settle group. */
  ungrouped: readonly string[],
): { state: CheckState; notProven: string[] } {
  if (findings.length > 0) return { state: 'fail', notProven: [] };
  if (!side.grouped && (entries > 0 || side.rows > 0)) {
    const log = ungrouped.length > 0 ? `the order log of bucket ${ungrouped.join(', ')}` : 'the order log';
    return {
      state: 'not proven',
      notProven: [`${log} has no \`settle\` consumer group: this sale is not settled into PostgreSQL`],
    };
  }
  const notProven: string[] = [];
  if (side.startedAt === null && side.earlierSales > 0) {
    notProven.push(
      `the sale's meta hash has no startedAt of its own (a sale started by an older version): ${side.earlierSales} rows Redis does not know, older than the log's first entry, were set aside as an earlier sale's, and orders Redis lost with the log's head (a restored snapshot, a lost master) look the same; restart the sale (PUT /api/products/:id) to record its start`,
    );
  }
  if (side.unsettled.length > 0) {
    notProven.push(
      `${side.unsettled.length} orders not settled yet (pending, or not delivered to the settle group): run it again once settlement has caught up`,
    );
  }
  return { state: notProven.length > 0 ? 'not proven' : 'pass', notProven };
}

/**
 * The head SETTLE_TRIM cut from the log, rebuilt from PostgreSQL's `order_events`: the
 * settler trims only what every group has settled, so each trimmed entry was committed
 * there first. The entries before the stream's first (`before`) of this sale's orders
 * (those its order states hash knows; PostgreSQL keeps every sale of the product id),
 * in Redis's order, fed into `check` a page at a time. Whole when PostgreSQL holds as
 * many entries before the stream's first (as XINFO said it) as Redis says left it; those
 * trimmed since (before the first page the audit read) come from PostgreSQL too. A
 * restored PostgreSQL that lacks some leaves the log not proven.
 */
async function rebuildHead(
  redis: RedisClient,
  db: Client,
  productId: string,
  k: ProductKeys,
  trimmed: { count: number; firstId: string | null },
  before: string | null,
  check: LogCheck,
): Promise<
  { whole: true; first: LogEntry | null; last: LogEntry | null; entries: number } | { whole: false; why: string }
> {
  let first: LogEntry | null = null;
  let last: LogEntry | null = null;
  let entries = 0;
  let beforeFirst = 0;
  for await (const rows of readSettledEntries(db, productId, before)) {
    const ours = await stateRecords(
      redis,
      () => k,
      rows.map((r) => r.order_id),
    );
    for (const row of rows) {
      if (!ours.has(row.order_id)) continue;
      const entry: LogEntry = {
        id: row.stream_id,
        ms: Number(row.stream_id.split('-')[0]),
        kind: row.event === 'created' ? 'order' : row.event,
        orderId: row.order_id,
        userId: row.user_id,
        quantity: row.quantity,
      };
      check.add(entry);
      first ??= entry;
      last = entry;
      entries++;
      if (trimmed.firstId === null || compareIds(row.stream_id, trimmed.firstId) < 0) beforeFirst++;
    }
  }
  if (beforeFirst === trimmed.count) return { whole: true, first, last, entries };
  return {
    whole: false,
    why: `${trimmed.count} entries were trimmed from the log's head and PostgreSQL holds ${beforeFirst} of them: it cannot rebuild the log`,
  };
}

/** An order states hash record (`<R|P|C|E>|<userId>|<quantity>[|<paymentId>]`, includes/order-state.lua) as an order's state. */
function stateOf(record: string, ms: number): OrderState {
  const [status, userId, quantity] = record.split('|');
  return { status: STATUS[status as keyof typeof STATUS], userId, quantity: Number(quantity), ms };
}
