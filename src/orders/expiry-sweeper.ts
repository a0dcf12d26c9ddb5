import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { ORDERS_CONFIG, OrdersConfig } from './orders.config';
import type { RedisClient } from '../redis/create-client';
import { KeyLayout } from '../redis/key-layout';
import { dueReservations } from '../redis/lua-scripts';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { markTags, markWhatCameBefore } from '../redis/shard-marks';
import { Metrics } from '../telemetry/metrics';
import { productOfOrder } from './order';
import { FaultStop } from './fault-stop';
import { OrderOutcomes } from './order-outcomes';

/** Reservations read from a shard's due index per command: a round stays short, the next one goes on. */
const SWEEP_BATCH = 256;
/** Every this many rounds, one reads every MARK_TAGS' index, not only each master's first (the settler's rule: settler.ts). */
const ALL_TAGS_EVERY = 10;

/**
 * Expires the reservations whose payment deadline has passed, driven by Redis: each
 * shard's index of deadlines (includes/shard-marks.lua), which the purchase scripts
 * fill and the outcome script empties in the step that decides, read by every
 * instance with one command per shard a round (due-reservations-1.lua, by that node's
 * clock), so a crashed instance's reservations still expire and a catalog of idle
 * products costs nothing. Each expiry is its own atomic script that re-checks the
 * deadline by the product's own node's clock and removes the order from the indexes as
 * it returns its units, so a sweep that dies half-way (or two instances sweeping at
 * once) returns nothing twice: what is left is found by the next round, anywhere.
 */
@Injectable()
export class ExpirySweeper implements OnApplicationBootstrap, BeforeApplicationShutdown {
  private readonly logger = new Logger('ExpirySweeper');
  private timer?: NodeJS.Timeout;
  private round?: Promise<void>;
  private stopped = false;
  private failing = false;
  /** Reservations this instance expired. */
  expired = 0;
  /** Whether what came before the shard marks is marked (src/redis/shard-marks.ts markWhatCameBefore). */
  private cameBefore = false;
  /** What the loop costs Redis, for /metrics: commands sent, rounds, reservations due in the last round. */
  readonly cost = { commands: 0, passes: 0, productsWithWork: 0 };

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
    private readonly outcomes: OrderOutcomes,
    private readonly faults: FaultStop,
    @Inject(ORDERS_CONFIG.token) private readonly config: OrdersConfig,
    metrics: Metrics,
  ) {
    metrics.readLoop('expiry', this.cost);
  }

  onApplicationBootstrap(): void {
    this.schedule();
  }

  /** As shutdown begins, while Redis is still open: the round in hand finishes. */
  async beforeApplicationShutdown(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.round;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.round = this.sweep().then(
        () => this.schedule(),
        () => this.schedule(),
      );
    }, this.config.expirySweepMs);
    this.timer.unref();
  }

  /**
   * One round over every shard's due index (on a cluster each master's first tag's, and
   * every tag's each ALL_TAGS_EVERY rounds, as the settler reads the marks:
   * src/redis/shard-marks.ts); never throws (a Redis that is down is
   * logged once, and tried again next round).
   */
  async sweep(): Promise<number> {
    let expired = 0;
    this.cost.passes++;
    this.cost.productsWithWork = 0;
    try {
      // Once per prefix, before the first round: what an older version left, marked.
      if (!this.cameBefore) {
        const marked = await markWhatCameBefore(this.redis, this.keys);
        if (marked > 0) this.logger.log(`marked ${marked} products with orders written before the shard marks`);
        this.cameBefore = true;
      }
      let failure: unknown = null;
      for (const tag of markTags(this.redis, this.cost.passes % ALL_TAGS_EVERY === 1)) {
        if (this.stopped) break;
        // One shard's trouble (down) leaves the others' expiries on time.
        try {
          const shard = await this.sweepShard(this.keys.marks(tag).due);
          expired += shard.expired;
          failure ??= shard.failure;
        } catch (err) {
          failure ??= err;
        }
      }
      if (failure !== null) throw failure;
      if (this.failing) this.logger.log('sweeping again');
      this.failing = false;
    } catch (err) {
      if (!this.failing)
        this.logger.warn(`expiry sweep failed, retrying every ${this.config.expirySweepMs} ms: ${String(err)}`);
      this.failing = true;
    }
    this.expired += expired;
    return expired;
  }

  /**
   * Every due reservation of the shard, SWEEP_BATCH at a time, each batch's expiries
   * sent together. An order that is no reservation any more (paid, cancelled, its sale
   * restarted) but still in this index was left by an outcome decided on another node
   * (its slot moved): it leaves here. One still reserved is not yet due by its own
   * node's clock, and one whose expiry failed (its shard down) is tried next round: the
   * page after them is read past them, so they hold up no other's expiry: the first
   * failure is returned beside what expired.
   */
  private async sweepShard(due: string): Promise<{ expired: number; failure: unknown }> {
    let expired = 0;
    let failure: unknown = null;
    for (let offset = 0; !this.stopped;) {
      this.cost.commands++;
      const orders = await dueReservations.run(this.redis, [due], offset, SWEEP_BATCH);
      this.cost.productsWithWork += orders.length;
      const outcomes: PromiseSettledResult<'expired' | 'reserved' | 'gone'>[] = [];
      if (this.faults.armed('sweep-between')) {
        // The fault suite stops the process between two expiries: one at a time, then.
        for (const orderId of orders) {
          if (expired > 0) this.faults.reached('sweep-between');
          const [outcome] = await Promise.allSettled([this.expire(orderId)]);
          if (outcome.status === 'fulfilled' && outcome.value === 'expired') expired++;
          outcomes.push(outcome);
        }
      } else {
        outcomes.push(...(await Promise.allSettled(orders.map((orderId) => this.expire(orderId)))));
        expired += outcomes.filter((o) => o.status === 'fulfilled' && o.value === 'expired').length;
      }
      const stale = orders.filter((_, i) => outcomes[i].status === 'fulfilled' && outcomes[i].value === 'gone');
      if (stale.length > 0) {
        this.cost.commands++;
        await this.redis.zrem(due, ...stale);
      }
      const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
      if (failed) failure ??= failed.reason;
      if (orders.length < SWEEP_BATCH) break;
      // What stays in the index (not yet due by its node's clock, or failed) is read past.
      offset += outcomes.filter((o) => o.status === 'rejected' || o.value === 'reserved').length;
    }
    return { expired, failure };
  }

  private expire(orderId: string): Promise<'expired' | 'reserved' | 'gone'> {
    const productId = productOfOrder(orderId);
    if (productId === null) return Promise.resolve('gone');
    this.cost.commands++;
    return this.outcomes.expire(this.keys.product(productId), orderId);
  }
}
