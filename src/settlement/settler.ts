import { productOfBucket } from '../sale/buckets';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool } from 'pg';
import type { SettlementConfig } from './settlement.config';
import type { FaultStop } from '../orders/fault-stop';
import type { RedisClient } from '../redis/create-client';
import type { KeyLayout } from '../redis/key-layout';
import { settleDrained, trimSettled, unmark } from '../redis/lua-scripts';
import { MarkReads } from '../redis/shard-marks';
import { parseEntry, StreamEvent, writeBatch } from './settle-batch';

/** The consumer group every settler of every instance reads the order streams in. */
export const SETTLE_GROUP = 'settle';

/**
 * How long the settler rests when no product had anything to settle (one read of each
 * shard's marks per rest): 50 ms after work, doubling while nothing comes, up to
 * IDLE_CAP_MS. An order this instance writes ends the rest at once (nudge()); another
 * instance's waits for it, at most IDLE_CAP_MS.
 */
const IDLE_MS = 50;
const IDLE_CAP_MS = 400;
/** Products read from one shard's marks per pass, at most; the next pass reads on from there. */
const MARKS_PAGE = 500;
/** Products a pass settles at once, at most: one PostgreSQL connection each (of the pool's, postgres.ts). */
export const PASS_CONCURRENCY = 3;
/**
 * How long it rests after a pass that settled less than a full batch (SETTLE_BATCH):
 * during a sale, the entries of the next 25 ms go into one transaction instead of
 * dozens of small ones, so the app's CPU goes to buyers, not to per-batch round trips,
 * while an order still reaches PostgreSQL well within 100 ms (the bench's settlement lag).
 */
const LINGER_MS = 25;
/** How long it rests after PostgreSQL (or Redis) failed, doubling up to the cap. */
const BACKOFF_MS = 200;
const BACKOFF_CAP_MS = 5_000;

type Entry = [id: string, fields: string[]];

export interface SettlerStatus {
  /** Entries written to PostgreSQL and acknowledged by this settler. */
  readonly settled: number;
  /**
   * Why it cannot settle now (PostgreSQL refuses or is away, Redis refuses a command, a
   * product's batch fails, the migrations fail), while it cannot; null once it can.
   */
  readonly failing: string | null;
}

/**
 * Settles every product's order stream into PostgreSQL through one Redis Streams
 * consumer group, exactly once. It finds the products with work in each shard's
 * marks (includes/shard-marks.lua), which the scripts that append to an order log
 * raise in the same step, never by reading every product listed: idle, a pass is one
 * read per shard. Per product with a mark:
 *
 * 1. read a batch: first this consumer's own pending entries (delivered before, not
 *    acknowledged: a failed batch), then entries another consumer left pending longer
 *    than SETTLE_CLAIM_IDLE_MS (it crashed: XAUTOCLAIM makes them ours), then new ones
 *    (XREADGROUP `>`);
 * 2. write the batch in one PostgreSQL transaction whose writes are idempotent by
 *    order id and stream id (settle-batch.ts), and COMMIT;
 * 3. only then XACK.
 *
 * A crash before COMMIT leaves nothing in PostgreSQL and the entries pending, to be
 * claimed; a crash between COMMIT and XACK leaves them pending too, and writing them
 * again changes nothing. Nothing here touches a purchase: the sale never waits for
 * PostgreSQL, and a PostgreSQL that is down only makes the pending list longer.
 */
export class Settler {
  readonly consumer = `${hostname()}/${process.pid}`;
  private readonly groups = new Set<string>();
  /** Per stream, where the next XAUTOCLAIM scan of the pending list starts (its reply's cursor). */
  private readonly claimFrom = new Map<string, string>();
  /** Per stream, when (performance.now()) its pending list was last scanned through to its end. */
  private readonly claimedAt = new Map<string, number>();
  /** Per shard marks key, where the next pass's page starts (rank). */
  private readonly marksFrom = new Map<string, number>();
  private readonly marksRead: MarkReads;
  /** What the loop costs Redis, for /metrics: commands sent, passes, products with work in the last pass. */
  readonly cost = { commands: 0, passes: 0, productsWithWork: 0 };
  private running?: Promise<void>;
  /** Whether this settler has marked the prefix as settled (KeyLayout.settling). */
  private marked = false;
  private stopped = false;
  private settled = 0;
  /** Entries trimmed from the streams by this settler (SETTLE_TRIM). */
  trimmed = 0;
  private failing: string | null = null;
  private wake?: () => void;

  constructor(
    private readonly redis: RedisClient,
    private readonly pool: Pool,
    private readonly keys: KeyLayout,
    private readonly config: Pick<SettlementConfig, 'settleBatch' | 'settleClaimIdleMs' | 'settleTrim'>,
    private readonly faults?: FaultStop,
    private readonly log: (line: string) => void = () => undefined,
  ) {
    this.marksRead = new MarkReads(redis);
  }

  start(): void {
    this.running ??= this.loop();
  }

  /** Stops after the batch in hand (settled and acknowledged, or left pending for another). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
  }

  status(): SettlerStatus {
    return { settled: this.settled, failing: this.failing };
  }

  /**
   * Marks the prefix settled (KeyLayout.settling), once per settler and before anything
   * else it does, PostgreSQL's migrations included: from then on every instance's sale
   * resets keep the order logs' consumer group, even while PostgreSQL is away.
   */
  async mark(): Promise<void> {
    if (this.marked) return;
    await this.redis.set(this.keys.settling, '1');
    this.marked = true;
  }

  /** Settlement cannot begin (its migrations fail): status() says why until the loop starts. */
  cannotStart(reason: string): void {
    this.failing = `cannot start: ${reason}`;
  }

  /**
   * One pass over the products with work (each shard's marks), a batch each; the
   * entries settled. A product whose batch fails (its shard down, a batch PostgreSQL
   * refuses) is left for the next pass and does not hold the others up; the pass
   * throws only when nothing could be settled and something failed. A product found
   * settled through (nothing undelivered, nothing pending) leaves the marks, unless an
   * entry was written since they were read. For the loop and for tests.
   */
  async settleOnce(): Promise<number> {
    await this.mark();
    this.cost.passes++;
    let settled = 0;
    const [work, unread] = await this.readMarks();
    let failure: unknown = unread;
    this.cost.productsWithWork = work.length;
    const settleNext = async (): Promise<void> => {
      for (let next = work.shift(); next && !this.stopped; next = work.shift()) {
        const { marks, productId, score } = next;
        try {
          const n = await this.settleProduct(productId);
          if (n === 0) await this.unmarkIfSettled(marks, productId, score);
          settled += n;
        } catch (err) {
          failure ??= err;
          this.failingProducts.add(productId);
          continue;
        }
        this.failingProducts.delete(productId);
      }
    };
    // A few products at once, each batch its own transaction on its own connection: a
    // pass costs the round trips of its longest batch, not of all of them in turn (the
    // buckets of one product are products here, src/sale/buckets.ts).
    await Promise.all(Array.from({ length: Math.min(PASS_CONCURRENCY, work.length) }, settleNext));
    if (failure !== null && settled === 0) throw failure;
    this.failing =
      failure === null
        ? null
        : `products ${[...this.failingProducts].join(', ')}: ${(failure as Error).message ?? String(failure)}`;
    return settled;
  }

  /**
   * The marked products of every shard this pass reads (MarkReads), a page of each, and
   * the first shard's failure to answer: a shard that is down holds up no other's.
   */
  private async readMarks(): Promise<[{ marks: string; productId: string; score: string }[], unknown]> {
    const work: { marks: string; productId: string; score: string }[] = [];
    let failure: unknown = null;
    for (const tag of this.marksRead.tags()) {
      const marks = this.keys.marks(tag).settle;
      const from = this.marksFrom.get(marks) ?? 0;
      this.cost.commands++;
      let page: string[];
      try {
        page = await this.redis.zrange(marks, String(from), String(from + MARKS_PAGE - 1), 'WITHSCORES');
      } catch (err) {
        failure ??= err;
        continue;
      }
      // A full page: the next pass reads on from its end, so no product waits behind
      // more than a page of others; a short one: from the start again.
      this.marksFrom.set(marks, page.length === 2 * MARKS_PAGE ? from + MARKS_PAGE : 0);
      for (let i = 0; i < page.length; i += 2) work.push({ marks, productId: page[i], score: page[i + 1] });
    }
    return [work, failure];
  }

  /**
   * A product that had nothing to settle leaves the marks once nothing of its log is
   * pending in the group either (another consumer's batch in hand, or a dead one's
   * waiting to be claimed, keep it); the log gone (a deleted product), it leaves too.
   */
  private async unmarkIfSettled(marks: string, productId: string, score: string): Promise<void> {
    const stream = this.keys.product(productId).orders;
    this.cost.commands++;
    const pending = await settleDrained.run(this.redis, [stream], SETTLE_GROUP);
    if (pending > 0) return;
    if (pending < 0) this.forget(stream);
    this.cost.commands++;
    await unmark.run(this.redis, [marks], productId, score);
  }

  private forget(stream: string): void {
    this.groups.delete(stream);
    this.claimFrom.delete(stream);
    this.claimedAt.delete(stream);
  }

  /** Products whose last batch failed. */
  readonly failingProducts = new Set<string>();

  /** An order written here: an idle rest ends now, so it reaches PostgreSQL without waiting for the rest's end. */
  nudge(): void {
    if (this.idle) this.wake?.();
  }

  private idle = false;

  private async loop(): Promise<void> {
    let backoff = BACKOFF_MS;
    let idleMs = IDLE_MS;
    while (!this.stopped) {
      const before = this.failing;
      let settled: number;
      try {
        settled = await this.settleOnce();
        backoff = BACKOFF_MS;
      } catch (err) {
        this.failing = (err as Error).message ?? String(err);
        settled = -1;
      }
      // Said once when it starts failing, once when it is well again.
      if (this.failing && !before) this.log(`settlement failing, retrying (the sale is unaffected): ${this.failing}`);
      if (before && !this.failing) this.log('settling again');
      if (settled < 0) {
        await this.rest(backoff);
        backoff = Math.min(backoff * 2, BACKOFF_CAP_MS);
      } else if (settled === 0) {
        this.idle = true;
        await this.rest(idleMs);
        this.idle = false;
        idleMs = Math.min(idleMs * 2, IDLE_CAP_MS);
      } else {
        idleMs = IDLE_MS;
        if (settled < this.config.settleBatch) await this.rest(LINGER_MS);
      }
    }
  }

  private rest(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const controller = new AbortController();
    this.wake = () => controller.abort();
    return sleep(ms, undefined, { signal: controller.signal }).catch(() => undefined);
  }

  private async settleProduct(productId: string): Promise<number> {
    const stream = this.keys.product(productId).orders;
    const entries = await this.read(stream);
    if (entries.length === 0) return 0;
    const events = entries.map(([id, fields]) => parseEntry(id, fields)).filter((e): e is StreamEvent => e !== null);
    if (events.length > 0) await this.write(productId, events);
    this.faults?.reached('settle-before-ack');
    this.cost.commands++;
    await this.redis.xack(stream, SETTLE_GROUP, ...entries.map(([id]) => id));
    this.settled += entries.length;
    // SETTLE_TRIM: what every group has settled leaves the stream (never what one has not).
    if (this.config.settleTrim) {
      // Read after the await: another product's batch may add to it meanwhile.
      const trimmed = await trimSettled.run(this.redis, [stream], '');
      this.trimmed += trimmed;
    }
    return entries.length;
  }

  private async write(productId: string, events: readonly StreamEvent[]): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      // A bucket's orders are its product's (src/sale/buckets.ts): PostgreSQL knows no buckets.
      await writeBatch(client, productOfBucket(productId), events);
      this.faults?.reached('settle-before-commit');
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      // A connection that failed mid-transaction is not given back for reuse.
      client.release(err as Error);
      throw err;
    }
    client.release();
  }

  /** The next batch of the stream for this consumer: its own pending ones, then claimed ones, then new ones. */
  private async read(stream: string): Promise<Entry[]> {
    try {
      return await this.readFrom(stream);
    } catch (err) {
      // The stream was deleted (a sale restarted with discardOrders) and its group
      // with it: made again on the next pass.
      if (!/NOGROUP|requires the key to exist/.test(String(err))) throw err;
      this.forget(stream);
      return [];
    }
  }

  private async readFrom(stream: string): Promise<Entry[]> {
    await this.ensureGroup(stream);
    const count = this.config.settleBatch;
    const own = await this.readGroup(stream, '0', count);
    if (own.length > 0) return own;
    const live = await this.claimDue(stream, count);
    if (live.length > 0) return live;
    return this.readGroup(stream, '>', count);
  }

  /**
   * Entries other consumers left pending past SETTLE_CLAIM_IDLE_MS, claimed (XAUTOCLAIM):
   * a scan of the pending list goes on pass after pass while its pages come back full,
   * and starts again only once per claim-idle period, not every pass (nothing becomes
   * claimable faster).
   */
  private async claimDue(stream: string, count: number): Promise<Entry[]> {
    const from = this.claimFrom.get(stream) ?? '0-0';
    if (from === '0-0' && performance.now() - (this.claimedAt.get(stream) ?? -Infinity) < this.config.settleClaimIdleMs)
      return [];
    let claimed = await this.claim(stream, from, count);
    // A scan that began mid-list and came to its end with nothing goes round once more
    // from the start: a cursor read in a stream since made anew (a sale restarted), or
    // past what is pending now, never skips an entry.
    if (from !== '0-0' && claimed[0] === '0-0' && claimed[1].length === 0)
      claimed = await this.claim(stream, '0-0', count);
    this.claimFrom.set(stream, claimed[0]);
    if (claimed[0] === '0-0') this.claimedAt.set(stream, performance.now());
    // Entries deleted while pending come back as nil (Redis 7: and in the third field).
    return claimed[1].filter((e): e is Entry => e !== null);
  }

  /** XAUTOCLAIM: entries other consumers left pending past SETTLE_CLAIM_IDLE_MS, from `from`; the next cursor first. */
  private async claim(stream: string, from: string, count: number): Promise<[string, (Entry | null)[], string[]?]> {
    this.cost.commands++;
    return (await this.redis.call(
      'XAUTOCLAIM',
      stream,
      SETTLE_GROUP,
      this.consumer,
      this.config.settleClaimIdleMs,
      from,
      'COUNT',
      count,
    )) as [string, (Entry | null)[], string[]?];
  }

  private async readGroup(stream: string, from: '0' | '>', count: number): Promise<Entry[]> {
    this.cost.commands++;
    const reply = (await this.redis.xreadgroup(
      'GROUP',
      SETTLE_GROUP,
      this.consumer,
      'COUNT',
      count,
      'STREAMS',
      stream,
      from,
    )) as [string, [string, string[] | null][]][] | null;
    // A pending entry deleted since (XDEL) comes back without fields: acknowledged, nothing to settle.
    return (reply?.[0]?.[1] ?? []).map(([id, fields]) => [id, fields ?? []]);
  }

  /**
   * The group, created at the stream's start (id 0: every entry is settled, whenever the
   * group is made). Never the stream: a mark of a product deleted since finds no log
   * (the read says so, and the mark goes), and makes none.
   */
  private async ensureGroup(stream: string): Promise<void> {
    if (this.groups.has(stream)) return;
    try {
      this.cost.commands++;
      await this.redis.xgroup('CREATE', stream, SETTLE_GROUP, '0');
    } catch (err) {
      if (!/BUSYGROUP/.test(String(err))) throw err;
    }
    this.groups.add(stream);
  }
}
