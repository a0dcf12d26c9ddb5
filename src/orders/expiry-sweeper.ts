import { BeforeApplicationShutdown, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { ORDERS_CONFIG, OrdersConfig } from './orders.config';
import type { RedisClient } from '../redis/create-client';
import { KeyLayout } from '../redis/key-layout';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { FaultStop } from './fault-stop';
import { OrderOutcomes } from './order-outcomes';

/** Reservations expired per product per round, at most: a round stays short, the next one goes on. */
const SWEEP_BATCH = 256;

/**
 * Expires the reservations whose payment deadline has passed, driven by Redis: each
 * product's deadlines sorted set, read by every instance, so a crashed instance's
 * reservations still expire. Each expiry is its own atomic script that re-checks the
 * deadline by Redis's clock and removes the order from the set as it returns its
 * units, so a sweep that dies half-way (or two instances sweeping at once) returns
 * nothing twice: what is left is found by the next round, anywhere.
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

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
    private readonly outcomes: OrderOutcomes,
    private readonly faults: FaultStop,
    @Inject(ORDERS_CONFIG.token) private readonly config: OrdersConfig,
  ) {}

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

  /** One round over every product; never throws (a Redis that is down is logged once, and tried again next round). */
  async sweep(): Promise<number> {
    let expired = 0;
    try {
      const products = await this.redis.smembers(this.keys.products);
      let failure: unknown = null;
      for (const productId of products) {
        if (this.stopped) break;
        // One product's trouble (its shard down) leaves the others' expiries on time.
        try {
          expired += await this.sweepProduct(productId);
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

  /** Every due reservation of the product, SWEEP_BATCH at a time, each batch's expiries sent together. */
  private async sweepProduct(productId: string): Promise<number> {
    const k = this.keys.product(productId);
    const [seconds, micros] = await this.redis.time();
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    let expired = 0;
    for (;;) {
      if (this.stopped) return expired;
      // Due by Redis's clock (the script checks again, on the product's own node).
      const due = await this.redis.zrangebyscore(k.deadlines, '-inf', now, 'LIMIT', 0, SWEEP_BATCH);
      if (this.faults.armed('sweep-between')) {
        // The fault suite stops the process between two expiries: one at a time, then.
        for (const orderId of due) {
          if (expired > 0) this.faults.reached('sweep-between');
          if (await this.outcomes.expire(k, orderId)) expired++;
        }
      } else {
        const done = await Promise.all(due.map((orderId) => this.outcomes.expire(k, orderId)));
        expired += done.filter(Boolean).length;
      }
      if (due.length < SWEEP_BATCH) return expired;
    }
  }
}
