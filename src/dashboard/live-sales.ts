import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { hostname } from 'node:os';
import { TELEMETRY_CONFIG, TelemetryConfig } from '../telemetry/telemetry.config';
import { PurchasePath } from '../orders/purchases/purchase-path';
import type { RedisClient } from '../redis/create-client';
import { KeyLayout } from '../redis/key-layout';
import { livePublish, livePublishKeys } from '../redis/lua-scripts';
import { isOutcomeUnknown, isRedisUnavailable } from '../redis/redis-errors';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { PurchaseListener, PurchaseTelemetry } from '../telemetry/purchase-telemetry';

/** How often the instance adds what it counted to Redis: the dashboard's resolution, and its whole Redis cost. */
export const PUBLISH_INTERVAL_MS = 250;
/** The live hash outlives the sale's last answer by a day, then Redis drops it. */
export const LIVE_TTL_MS = 24 * 60 * 60 * 1000;
/** A product nobody bought or reset for this long is forgotten here (it stays in Redis). */
const FORGET_AFTER_MS = 10 * 60 * 1000;
/**
 * Products counted at once. A buyer may name any valid id; past this many, new ones
 * are not counted (a flood of made-up ids must not grow the heap without bound).
 */
const MAX_PRODUCTS = 10_000;

/** One product as this instance counts it between publishes. */
interface Counts {
  /** Answers by code since the last publish. */
  answers: Map<string, number>;
  /** Buyers that arrived and are not answered yet, in this instance. */
  waiting: number;
  /** Something to publish (an answer, an arrival, a reset). */
  dirty: boolean;
  /** The last arrival or reset, for the list of products seen. */
  seenAt: number;
  /** Redis said the product has a sale (the last publish wrote), or this instance started one. */
  known: boolean;
  /**
   * The sale the counts belong to, as Redis last said (a publish's reply, this
   * instance's own reset); '' until then. A publish with an older one is dropped.
   */
  saleId: string;
  /** Bumped by each restart here: counts taken before it are never put back after it. */
  restarts: number;
}

/**
 * The dashboard's aggregate: per product, answers by code and the buyers waiting in
 * this instance, counted in memory on each purchase (two Map operations, nothing
 * else), and added to the product's live hash in Redis once per tick, one script per
 * product that changed. So the dashboard costs Redis a few commands a second per
 * instance and product, however many buyers there are. With TELEMETRY=0 it listens
 * to nothing and publishes nothing.
 */
@Injectable()
export class LiveSales implements PurchaseListener, OnModuleInit, OnApplicationShutdown {
  /** `<hostname>/<pid>`: what the dashboard calls this app instance. */
  readonly instance = `${hostname()}/${process.pid}`;
  private readonly logger = new Logger('LiveSales');
  private readonly products = new Map<string, Counts>();
  private timer: NodeJS.Timeout | undefined;
  /** The publish under way, so that no two overlap and the last flush waits for it. */
  private publishing: Promise<void> | null = null;
  private failing = false;

  constructor(
    @Inject(TELEMETRY_CONFIG.token) private readonly config: TelemetryConfig,
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
    private readonly purchases: PurchasePath,
    private readonly telemetry: PurchaseTelemetry,
  ) {}

  get enabled(): boolean {
    return this.config.telemetry;
  }

  onModuleInit(): void {
    if (!this.enabled) return;
    this.telemetry.listen(this);
    this.timer = setInterval(() => void this.publish(), PUBLISH_INTERVAL_MS);
    // A tick must never keep the process alive.
    this.timer.unref();
  }

  arrived(productId: string): void {
    const counts = this.products.get(productId) ?? this.track(productId);
    if (!counts) return;
    counts.waiting++;
    counts.dirty = true;
  }

  answered(productId: string, code: string): void {
    const counts = this.products.get(productId);
    if (!counts) return;
    counts.waiting--;
    counts.answers.set(code, (counts.answers.get(code) ?? 0) + 1);
    counts.dirty = true;
  }

  /**
   * A sale of the product (re)starts now: what this instance counted and has not
   * published belongs to the last sale, so it is dropped. Called right before the
   * reset script is sent: a publish sent earlier reaches Redis first (one connection
   * per slot, in order) and the reset deletes it with the rest.
   */
  saleRestarted(productId: string): void {
    if (!this.enabled) return;
    const counts = this.products.get(productId) ?? this.track(productId);
    if (!counts) return;
    counts.answers = new Map();
    counts.known = true;
    counts.restarts++;
    // The reset deletes this instance's fields too: the next tick writes them again.
    counts.dirty = true;
  }

  /**
   * The reset script answered: the new sale's id (reset-sale-10.lua). What this
   * instance counts from now on belongs to it; what another instance counted in the
   * last sale and publishes later carries the old id, and Redis drops it.
   */
  saleStarted(productId: string, saleId: number): void {
    const counts = this.products.get(productId);
    if (counts) counts.saleId = String(saleId);
  }

  /** Products this instance saw lately (a buyer, a reset), the latest first. */
  recent(now = Date.now()): { productId: string; seenMsAgo: number }[] {
    return [...this.products]
      .filter(([, c]) => c.known)
      .sort(([, a], [, b]) => b.seenAt - a.seenAt)
      .map(([productId, c]) => ({ productId, seenMsAgo: now - c.seenAt }));
  }

  /** One publish: every product that changed, one script each. Never two at once. */
  publish(): Promise<void> {
    this.publishing ??= this.publishChanged().finally(() => (this.publishing = null));
    return this.publishing;
  }

  /**
   * The last publish, after the HTTP server closed (every purchase answered) and
   * before RedisModule closes the client: Nest calls a global module's shutdown hooks
   * (RedisModule's) after those of the modules that use it.
   */
  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.timer);
    if (!this.enabled) return;
    await this.publishing;
    await this.publish();
  }

  private track(productId: string): Counts | undefined {
    if (this.products.size >= MAX_PRODUCTS) return undefined;
    const counts: Counts = {
      answers: new Map(),
      waiting: 0,
      dirty: false,
      seenAt: Date.now(),
      known: false,
      saleId: '',
      restarts: 0,
    };
    this.products.set(productId, counts);
    return counts;
  }

  private async publishChanged(): Promise<void> {
    const now = Date.now();
    const changed: [string, Counts][] = [];
    for (const [productId, counts] of this.products) {
      // Buyers waiting: publish every tick even without news, a heartbeat that keeps
      // `seen` fresh, so that a reader can tell a crashed instance's waiting buyers
      // (no heartbeat) from a live one's (live-event.ts, STALE_AFTER_MS).
      if (counts.dirty || counts.waiting > 0) changed.push([productId, counts]);
      else if (counts.waiting === 0 && now - counts.seenAt > FORGET_AFTER_MS) this.products.delete(productId);
    }
    if (changed.length === 0) return;
    let lostLocks = 0;
    try {
      ({ lostLocks } = await this.purchases.status());
    } catch {
      // Redlock's nodes did not answer: the count is still worth less than the answers.
    }
    await Promise.all(changed.map(([productId, counts]) => this.send(productId, counts, lostLocks)));
  }

  /**
   * Takes the product's counts and sends them in the same synchronous step (see
   * saleRestarted). A publish that may have run (sent, its reply lost) loses its
   * counts rather than risk adding them twice; one that was never sent (not
   * connected) puts them back for the next tick.
   */
  private async send(productId: string, counts: Counts, lostLocks: number): Promise<void> {
    // Not connected: the client would refuse the command unsent (enableOfflineQueue
    // is off, and an ended client says "Connection is closed", which also names a
    // command cut mid-way); keep the counts for a tick when it is back.
    if (this.redis.status !== 'ready') {
      this.notPublished(new Error(`Redis connection is ${this.redis.status}`));
      return;
    }
    const now = Date.now();
    const restarts = counts.restarts;
    const answers = counts.answers;
    counts.answers = new Map();
    counts.dirty = false;
    if (counts.waiting > 0 || answers.size > 0) counts.seenAt = now;
    const pairs: (string | number)[] = [];
    for (const [code, n] of answers) pairs.push(code, n);
    const k = this.keys.product(productId);
    try {
      const saleId = await livePublish.run(
        this.redis,
        livePublishKeys(k),
        this.instance,
        process.pid,
        Math.max(0, counts.waiting),
        lostLocks,
        now,
        LIVE_TTL_MS,
        counts.saleId,
        ...pairs,
      );
      counts.known = saleId !== null;
      // A restart here since the publish was sent set the id from its own reset.
      if (saleId !== null && counts.restarts === restarts) counts.saleId = saleId;
      // No such sale: forget the id now, so made-up ids do not crowd out real products.
      if (!counts.known && counts.waiting <= 0 && !counts.dirty && this.products.get(productId) === counts) {
        this.products.delete(productId);
      }
      if (this.failing) this.logger.log('publishing to Redis again');
      this.failing = false;
    } catch (err) {
      const unsent = isRedisUnavailable(err) && !isOutcomeUnknown(err);
      if (unsent && counts.restarts === restarts && this.products.get(productId) === counts) {
        for (const [code, n] of answers) counts.answers.set(code, (counts.answers.get(code) ?? 0) + n);
        counts.dirty = true;
      }
      this.notPublished(err as Error, !unsent);
    }
  }

  private notPublished(err: Error, lost = false): void {
    if (!this.failing) {
      this.logger.warn(`dashboard counts not published (${lost ? 'lost' : 'kept for the next tick'}): ${err.message}`);
    }
    this.failing = true;
  }
}
