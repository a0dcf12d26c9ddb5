import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool } from 'pg';
import type { SettlementConfig } from './settlement.config';
import type { FaultStop } from '../orders/fault-stop';
import type { RedisClient } from '../redis/create-client';
import type { KeyLayout } from '../redis/key-layout';
import { trimSettled } from '../redis/lua-scripts';
import { parseEntry, StreamEvent, writeBatch } from './settle-batch';

/** The consumer group every settler of every instance reads the order streams in. */
export const SETTLE_GROUP = 'settle';

/** How long the settler rests when no product had anything to settle. */
const IDLE_MS = 50;
/**
 * How long it rests after a pass that settled less than a full batch (SETTLE_BATCH):
 * during a sale, the entries of the next 100 ms go into one transaction instead of
 * dozens of small ones, so the app's CPU goes to buyers, not to per-batch round trips.
 */
const LINGER_MS = 100;
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
 * consumer group, exactly once:
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
  ) {}

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
   * One pass over every product, a batch each; the entries settled. A product whose
   * batch fails (its shard down, a batch PostgreSQL refuses) is left for the next pass
   * and does not hold the others up; the pass throws only when nothing could be
   * settled and something failed. For the loop and for tests.
   */
  async settleOnce(): Promise<number> {
    await this.mark();
    let settled = 0;
    let failure: unknown = null;
    for (const productId of await this.redis.smembers(this.keys.products)) {
      if (this.stopped) break;
      try {
        settled += await this.settleProduct(productId);
      } catch (err) {
        failure ??= err;
        this.failingProducts.add(productId);
        continue;
      }
      this.failingProducts.delete(productId);
    }
    if (failure !== null && settled === 0) throw failure;
    this.failing =
      failure === null
        ? null
        : `products ${[...this.failingProducts].join(', ')}: ${(failure as Error).message ?? String(failure)}`;
    return settled;
  }

  /** Products whose last batch failed. */
  readonly failingProducts = new Set<string>();

  private async loop(): Promise<void> {
    let backoff = BACKOFF_MS;
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
      } else if (settled === 0) await this.rest(IDLE_MS);
      else if (settled < this.config.settleBatch) await this.rest(LINGER_MS);
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
    await this.redis.xack(stream, SETTLE_GROUP, ...entries.map(([id]) => id));
    this.settled += entries.length;
    // SETTLE_TRIM: what every group has settled leaves the stream (never what one has not).
    if (this.config.settleTrim) this.trimmed += await trimSettled.run(this.redis, [stream], '');
    return entries.length;
  }

  private async write(productId: string, events: readonly StreamEvent[]): Promise<void> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      await writeBatch(client, productId, events);
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
      if (!/NOGROUP/.test(String(err))) throw err;
      this.groups.delete(stream);
      this.claimFrom.delete(stream);
      return [];
    }
  }

  private async readFrom(stream: string): Promise<Entry[]> {
    await this.ensureGroup(stream);
    const count = this.config.settleBatch;
    const own = await this.readGroup(stream, '0', count);
    if (own.length > 0) return own;
    const from = this.claimFrom.get(stream) ?? '0-0';
    let claimed = await this.claim(stream, from, count);
    // A scan that began mid-list and came to its end with nothing goes round once more
    // from the start: a cursor read in a stream since made anew (a sale restarted), or
    // past what is pending now, never skips an entry.
    if (from !== '0-0' && claimed[0] === '0-0' && claimed[1].length === 0)
      claimed = await this.claim(stream, '0-0', count);
    this.claimFrom.set(stream, claimed[0]);
    // Entries deleted while pending come back as nil (Redis 7: and in the third field).
    const live = claimed[1].filter((e): e is Entry => e !== null);
    if (live.length > 0) return live;
    return this.readGroup(stream, '>', count);
  }

  /** XAUTOCLAIM: entries other consumers left pending past SETTLE_CLAIM_IDLE_MS, from `from`; the next cursor first. */
  private async claim(stream: string, from: string, count: number): Promise<[string, (Entry | null)[], string[]?]> {
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

  /** The group, created at the stream's start (id 0: every entry is settled, whenever the group is made). */
  private async ensureGroup(stream: string): Promise<void> {
    if (this.groups.has(stream)) return;
    try {
      await this.redis.xgroup('CREATE', stream, SETTLE_GROUP, '0', 'MKSTREAM');
    } catch (err) {
      if (!/BUSYGROUP/.test(String(err))) throw err;
    }
    this.groups.add(stream);
  }
}
