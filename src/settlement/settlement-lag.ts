import { Inject, Injectable, Optional } from '@nestjs/common';
import type { Pool } from 'pg';
import type { RedisClient } from '../redis/create-client';
import { KeyLayout } from '../redis/key-layout';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { markTags } from '../redis/shard-marks';
import { streamMs } from './settle-batch';
import { PG_POOL } from './settlement.constants';
import { SETTLE_GROUP } from './settler';

/** How long /health waits for PostgreSQL's answer before it says `down`. */
const DATABASE_PROBE_MS = 1_000;

/**
 * At most this many entries are read to count the undelivered ones when Redis cannot
 * say how many (after a deletion), on every scrape: past it the count says this many,
 * a floor, never one unbounded read of a long stream per scrape.
 */
export const UNDELIVERED_COUNT_CAP = 10_000;

/** Products with work read from each shard's marks per look, at most, the busiest first: past it, the lag leaves out the quietest. */
const MARKED_READ_CAP = 1_000;

/** How far one product's settlement is behind its order stream. */
export interface ProductLag {
  readonly productId: string;
  /**
   * Entries not yet settled: delivered and unacknowledged, plus not yet delivered (when
   * Redis cannot count those, after a deletion: at most UNDELIVERED_COUNT_CAP of them).
   */
  readonly unsettled: number;
  /** Age of the oldest unsettled entry by Redis's clock, ms; 0 when nothing is unsettled. */
  readonly oldestMs: number;
}

export interface SettlementState {
  /** off: no DATABASE_URL; up: PostgreSQL answers; down: it does not (the sale goes on, settlement waits). */
  readonly database: 'off' | 'up' | 'down';
  readonly unsettled: number;
  readonly oldestMs: number;
  readonly products: readonly ProductLag[];
}

/**
 * Settlement's lag, read from Redis itself (the consumer group's pending list and what
 * it has not delivered yet), so any instance, and a tool, sees the same figures.
 */
@Injectable()
export class SettlementLag {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
    @Optional() @Inject(PG_POOL) private readonly pool?: Pool,
  ) {}

  async state(): Promise<SettlementState> {
    const [products, database] = await Promise.all([this.lag(), this.database()]);
    return {
      database,
      unsettled: products.reduce((n, p) => n + p.unsettled, 0),
      oldestMs: products.reduce((m, p) => Math.max(m, p.oldestMs), 0),
      products,
    };
  }

  async database(): Promise<SettlementState['database']> {
    if (!this.pool) return 'off';
    // A paused server would hold the answer for a whole statement timeout: a probe gives it a second.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'down'>((resolve) => {
      timer = setTimeout(() => resolve('down'), DATABASE_PROBE_MS);
    });
    const asked = this.pool.query('SELECT 1').then(
      () => 'up' as const,
      () => 'down' as const,
    );
    try {
      return await Promise.race([asked, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * One product's lag over the order logs of its escrow buckets (src/sale/buckets.ts:
   * bucket 0 is the product's own id, and the only one of a product of one bucket): the
   * entries unsettled in all of them, and the oldest one's age.
   */
  async forProduct(productId: string, buckets: readonly string[] = [productId]): Promise<ProductLag> {
    const [seconds, micros] = await this.redis.time();
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const lags = await Promise.all(buckets.map((id) => this.productLag(id, now)));
    return {
      productId,
      unsettled: lags.reduce((sum, l) => sum + l.unsettled, 0),
      oldestMs: lags.reduce((max, l) => Math.max(max, l.oldestMs), 0),
    };
  }

  /**
   * Per product with work for the settler (each shard's marks: includes/shard-marks.lua),
   * the MARKED_READ_CAP with the most entries written of each shard at most; every other
   * product listed has nothing unsettled, and costs nothing to look at. A shard that
   * does not answer throws (the lag reads as unknown), after the others were asked.
   */
  async lag(): Promise<ProductLag[]> {
    const [seconds, micros] = await this.redis.time();
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const marked = await Promise.allSettled(
      markTags(this.redis, false).map((tag) =>
        this.redis.zrange(this.keys.marks(tag).settle, '0', String(MARKED_READ_CAP - 1), 'REV'),
      ),
    );
    const failed = marked.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    const ids = [...new Set(marked.flatMap((r) => (r.status === 'fulfilled' ? r.value : [])))];
    return Promise.all(ids.sort().map((id) => this.productLag(id, now)));
  }

  private async productLag(productId: string, now: number): Promise<ProductLag> {
    const stream = this.keys.product(productId).orders;
    const none = { productId, unsettled: 0, oldestMs: 0 };
    let groups: unknown[][];
    try {
      groups = (await this.redis.xinfo('GROUPS', stream)) as unknown[][];
    } catch (err) {
      // No stream yet: nothing to settle. Any other error (a refused command, a shard
      // away) is not "settled": it is thrown, and the lag reads as unknown.
      if (/no such key/i.test(String(err))) return none;
      throw err;
    }
    const group = groups.map(fieldsOf).find((g) => g.get('name') === SETTLE_GROUP);
    if (!group) {
      // No settler has met this stream yet: all of it is unsettled.
      const [len, first] = await Promise.all([
        this.redis.xlen(stream),
        this.redis.xrange(stream, '-', '+', 'COUNT', 1),
      ]);
      return len === 0 ? none : { productId, unsettled: len, oldestMs: now - streamMs(first[0][0]) };
    }
    const pending = Number(group.get('pending') ?? 0);
    const lagField = group.get('lag');
    const lastDelivered = String(group.get('last-delivered-id') ?? '0-0');
    let undelivered = lagField === null || lagField === undefined ? null : Number(lagField);
    let oldest: string | null = null;
    if (pending > 0) {
      const summary = (await this.redis.xpending(stream, SETTLE_GROUP)) as [number, string | null, ...unknown[]];
      oldest = summary[1];
    }
    if (undelivered === null || (oldest === null && undelivered > 0)) {
      const next = await this.redis.xrange(stream, `(${lastDelivered}`, '+', 'COUNT', 1);
      oldest ??= next[0]?.[0] ?? null;
      // Redis cannot always say how many are undelivered (after a deletion): count them,
      // up to UNDELIVERED_COUNT_CAP.
      undelivered ??=
        next.length === 0
          ? 0
          : (await this.redis.xrange(stream, `(${lastDelivered}`, '+', 'COUNT', UNDELIVERED_COUNT_CAP)).length;
    }
    const unsettled = pending + undelivered;
    return { productId, unsettled, oldestMs: unsettled > 0 && oldest ? Math.max(0, now - streamMs(oldest)) : 0 };
  }
}

/** XINFO's flat [field, value, ...] reply as a map. */
function fieldsOf(flat: unknown[]): Map<string, unknown> {
  const map = new Map<string, unknown>();
  for (let i = 0; i + 1 < flat.length; i += 2) map.set(String(flat[i]), flat[i + 1]);
  return map;
}
