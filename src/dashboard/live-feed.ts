import { BeforeApplicationShutdown, Inject, Injectable, Logger, MessageEvent } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { Observable, Subscriber } from 'rxjs';
import { SETTLEMENT_CONFIG } from '../settlement/settlement.config';
import { ConfigsOf, configView } from '../settings/setting';
import { LockStrategyName, STRATEGY_CONFIG } from '../settings/strategy.config';
import { TELEMETRY_CONFIG } from '../telemetry/telemetry.config';
import { TooManyWatchersError } from '../errors/errors';
import type { RedisClient } from '../redis/create-client';
import { execAll } from '../redis/exec-all';
import type { ChainableCommander } from 'ioredis';
import { KeyLayout, ProductKeys } from '../redis/key-layout';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { SettlementLag } from '../settlement/settlement-lag';
import { requestContext } from '../telemetry/http-requests';
import { Escrow } from '../orders/escrow';
import { bucketsOf } from '../sale/buckets';
import {
  holderPid,
  LIVE_ORDERS_META,
  LiveBucket,
  LiveEvent,
  LiveLock,
  LiveOrders,
  liveOrders,
  readInstances,
  sumOrders,
} from './live-event';

/** What the live page says runs: the strategy, whether TELEMETRY records, whether orders settle. */
export const LIVE_CONFIG = configView('live', STRATEGY_CONFIG, TELEMETRY_CONFIG, SETTLEMENT_CONFIG);

/** How often a watched product is read: the events' rate, whatever the sale's. */
export const POLL_INTERVAL_MS = 250;
/** A watched product without a sale (a typo, a made-up id, a sale not yet started) is read once a second. */
export const NO_SALE_POLL_MS = 1_000;
/**
 * Distinct products polled at once per instance: each costs Redis a MULTI per poll,
 * and anyone may name any id. A page watches one product; 32 leaves room for many
 * people watching different sales.
 */
export const MAX_WATCHED_PRODUCTS = 32;
/** Open streams per instance (each holds a socket and a subscriber, not Redis reads). */
export const MAX_STREAMS = 256;
/**
 * One client's share of those bounds (a client is an address: request.ip, behind the
 * proxies TRUST_PROXY names): without it, one client opening 256 streams, or naming 32
 * made-up products, would lock every other watcher of this instance out.
 */
export const MAX_STREAMS_PER_CLIENT = 8;
export const MAX_PRODUCTS_PER_CLIENT = 4;
/**
 * A stream ends after this, however busy: an EventSource comes back after its retry
 * interval, counted afresh, so a client that went away (a tab left open, a script that
 * stopped reading) does not keep its places for ever.
 */
export const STREAM_LIFETIME_MS = 10 * 60_000;
/** A stream of a product without a sale (nothing to show but the wait) ends sooner. */
export const NO_SALE_LIFETIME_MS = 60_000;
/** What an EventSource waits before it reconnects after the stream ends (the app restarting). */
const RETRY_MS = 2_000;
/** A client that ignores the end of its stream at shutdown is cut after this. */
const END_GRACE_MS = 1_000;

/**
 * How each strategy's lock looks in the sale's Redis: a string `<pid>:<token>` (or a
 * classic mistake's bare token or timestamp), Redisson's hash, nodes of its own, or
 * no lock. Checked against the list of strategies at compile time.
 */
const LOCK_VIEWS: Record<LockStrategyName, { read: 'string' | 'hash' | null; note: string | null }> = {
  lock: { read: 'string', note: null },
  fenced: { read: 'string', note: null },
  reentrant: { read: 'hash', note: "reentrant: the lock's owner id is a random process id, not a pid" },
  redlock: { read: null, note: 'redlock: the lock lives on the Redlock nodes, which this page does not read' },
  atomic: { read: null, note: 'atomic: no lock (one Lua script per purchase)' },
  optimistic: { read: null, note: 'optimistic: no lock (WATCH/MULTI)' },
  none: { read: null, note: 'none: no lock at all (it oversells)' },
  'setnx-no-ttl': { read: 'string', note: "the recipe's token names no pid" },
  'setnx-then-expire': { read: 'string', note: "the recipe's token names no pid" },
  'unchecked-del': { read: 'string', note: "the recipe's token names no pid" },
  'get-then-del': { read: 'string', note: "the recipe's token names no pid" },
  'expiry-timestamp': { read: 'string', note: 'the lock holds an expiry time, not an owner' },
};

/** One watched product: its subscribers and the one poll that feeds them all. */
interface Watch {
  readonly subscribers: Set<Subscriber<MessageEvent>>;
  readonly timer: NodeJS.Timeout;
  reading: boolean;
  /** No sale at the last read: the next read is not before this (performance.now()). */
  nextReadAt: number;
}

/**
 * The streams of GET /api/live/:productId. Per product and instance one poll, four
 * times a second while anyone watches (once a second while the product has no sale)
 * and stopped when nobody does, reads the sale, its orders' counts,
 * the lock and the live hash in one MULTI and sends the same event to every watcher.
 * So the dashboard's reads do not grow with the buyers, and barely with the watchers.
 */
@Injectable()
export class LiveFeed implements BeforeApplicationShutdown {
  private readonly logger = new Logger('LiveFeed');
  private readonly watches = new Map<string, Watch>();
  private readonly responses = new Set<ServerResponse>();
  /** Streams asked for and not yet ended, by product, counted from the ask (see watch). */
  private readonly asked = new Map<string, number>();
  /** The same, per client: its streams by product. */
  private readonly clients = new Map<string, Map<string, number>>();
  private streams = 0;
  private closing = false;

  constructor(
    @Inject(LIVE_CONFIG.token) private readonly config: ConfigsOf<typeof LIVE_CONFIG.sections>,
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
    private readonly settlement: SettlementLag,
    private readonly escrow: Escrow,
  ) {}

  /**
   * The product's events for one client, the first at once. `response` is ended with
   * its connection when the app starts closing, so that an open stream neither holds
   * the graceful drain open nor counts at its deadline as a request cut mid-way.
   * Throws TooManyWatchersError (503, before any header is sent) past either bound.
   * Nest subscribes only after the handler returns, so the bounds count a stream
   * and its product from the ask, not from the subscription: two asks in between
   * cannot both take the last place. `client` (its address) has bounds of its own,
   * and a stream ends after STREAM_LIFETIME_MS (NO_SALE_LIFETIME_MS without a sale).
   */
  watch(productId: string, response: ServerResponse, client: string): Observable<MessageEvent> {
    const mine = this.clients.get(client) ?? new Map<string, number>();
    const streamsOfClient = [...mine.values()].reduce((a, b) => a + b, 0);
    if (streamsOfClient >= MAX_STREAMS_PER_CLIENT) {
      throw new TooManyWatchersError(`this client already holds ${MAX_STREAMS_PER_CLIENT} live streams here`);
    }
    if (!mine.has(productId) && mine.size >= MAX_PRODUCTS_PER_CLIENT) {
      throw new TooManyWatchersError(`this client already watches ${MAX_PRODUCTS_PER_CLIENT} products here`);
    }
    if (this.streams >= MAX_STREAMS) {
      throw new TooManyWatchersError(`this instance already holds ${MAX_STREAMS} live streams`);
    }
    if (!this.asked.has(productId) && this.asked.size >= MAX_WATCHED_PRODUCTS) {
      throw new TooManyWatchersError(`this instance already polls ${MAX_WATCHED_PRODUCTS} products`);
    }
    this.streams++;
    countUp(this.asked, productId);
    countUp(mine, productId);
    this.clients.set(client, mine);
    let counted = true;
    // Once per stream, whether Nest subscribed or not (response closed first).
    const release = () => {
      if (!counted) return;
      counted = false;
      this.streams--;
      countDown(this.asked, productId);
      countDown(mine, productId);
      if (mine.size === 0 && this.clients.get(client) === mine) this.clients.delete(client);
    };
    response.once('close', release);
    return new Observable<MessageEvent>((subscriber) => {
      if (this.closing) {
        subscriber.complete();
        endConnection(response);
        return;
      }
      this.responses.add(response);
      // A stream is no answer waiting to be given: its request's id leaves the lines
      // written from here on (and it is not timed as an answer).
      const context = requestContext.getStore();
      if (context) context.answered = true;
      let watch = this.watches.get(productId);
      if (!watch) {
        // Every watcher of the product shares the poll: it runs in no request's context.
        const timer = requestContext.exit(() => setInterval(() => void this.poll(productId), POLL_INTERVAL_MS));
        timer.unref();
        watch = { subscribers: new Set(), timer, reading: false, nextReadAt: 0 };
        this.watches.set(productId, watch);
      }
      watch.subscribers.add(subscriber);
      // Ends the stream (the client's EventSource comes back after its retry interval).
      let lifetime = setTimeout(() => subscriber.complete(), STREAM_LIFETIME_MS).unref();
      void this.read(productId).then(
        (event) => {
          if (event.initialStock === null) {
            watch.nextReadAt = Math.max(watch.nextReadAt, nextNoSaleRead());
            clearTimeout(lifetime);
            lifetime = setTimeout(() => subscriber.complete(), NO_SALE_LIFETIME_MS).unref();
          }
          subscriber.next(message(event));
        },
        () => undefined,
      );
      return () => {
        clearTimeout(lifetime);
        release();
        this.responses.delete(response);
        watch.subscribers.delete(subscriber);
        if (watch.subscribers.size === 0 && this.watches.get(productId) === watch) {
          clearInterval(watch.timer);
          this.watches.delete(productId);
        }
      };
    });
  }

  /** Closing starts (before the HTTP server closes): end every stream and its connection. */
  beforeApplicationShutdown(): void {
    this.closing = true;
    // Completing a subscriber runs its teardown, which forgets its response: take them first.
    const responses = [...this.responses];
    for (const watch of [...this.watches.values()]) {
      clearInterval(watch.timer);
      for (const subscriber of [...watch.subscribers]) subscriber.complete();
    }
    this.watches.clear();
    for (const response of responses) endConnection(response);
  }

  /** The product as it stands: the sale, the lock and every instance's share. */
  async read(productId: string): Promise<LiveEvent> {
    const k = this.keys.product(productId);
    const view = LOCK_VIEWS[this.config.lockStrategy];
    // The orders by state cost two counts (HLEN, ZCARD) and a few meta fields, in the
    // same MULTI, so they agree with the stock: never a read of every order.
    const batch = this.redis
      .multi()
      .hmget(k.meta, 'initialStock', 'perUserLimit', 'startsAt', 'endsAt', 'saleId', 'buckets', ...LIVE_ORDERS_META)
      .get(k.stock)
      .hgetall(k.live)
      .time()
      .hlen(k.states)
      .zcard(k.deadlines);
    const replies = await execAll(this.readLock(batch, k));
    const at = Date.now();
    const [[initial, limit, startsAt, endsAt, saleId, others, ...counts], stockValue, live, time, written, reserved] =
      replies as [(string | null)[], string | null, Record<string, string>, [string, string], number, number];
    const lock = this.lockOf(replies.slice(6));
    const known = initial !== null && stockValue !== null;
    const own = { id: productId, initialStock: Number(initial), stock: Number(stockValue), inFlight: 0, lock };
    const ids = bucketsOf(productId, others);
    const sale = known ? await this.buckets(ids, { ...own, orders: liveOrders(written, reserved, counts) }) : null;
    const initialStock = sale ? sale.initialStock : null;
    const stock = sale ? sale.stock : null;
    // Every bucket's order log settles on its own: the product's lag is theirs together.
    const settled = this.config.databaseUrl && known ? await this.settlement.forProduct(productId, ids) : null;
    return {
      at,
      productId,
      strategy: this.config.lockStrategy,
      telemetry: this.config.telemetry,
      saleId: known && saleId !== null ? Number(saleId) : null,
      initialStock,
      perUserLimit: known && limit !== null ? Number(limit) : null,
      stock,
      sold: known ? initialStock! - stock! : null,
      orders: sale ? sale.orders : null,
      buckets: sale ? sale.buckets : null,
      lock,
      lockNote: view.note,
      instances: readInstances(live, at),
      window: known
        ? {
            startsAt: startsAt === null ? null : Number(startsAt),
            endsAt: endsAt === null ? null : Number(endsAt),
            redisNow: Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000),
          }
        : null,
      ...(settled && { settlement: { unsettled: settled.unsettled, oldestMs: settled.oldestMs } }),
    };
  }

  /**
   * The sale over its escrow buckets: bucket 0's figures as read, and for a product of
   * several, each other bucket's (one MULTI each on its own shard) and every bucket's
   * stock with its units in flight (Escrow.read, what GET /api/products/:id sums), so
   * the product's figures are their sums. A poll's work, never a purchase's.
   */
  private async buckets(
    ids: readonly string[],
    first: Omit<LiveBucket, 'orders'> & { orders: LiveOrders },
  ): Promise<{ initialStock: number; stock: number; orders: LiveOrders; buckets: LiveBucket[] }> {
    const read =
      ids.length === 1
        ? [first]
        : await Promise.all([this.escrow.read(ids), Promise.all(ids.slice(1).map((id) => this.bucketOrders(id)))]).then(
            ([moves, rest]) =>
              [first, ...rest].map((b, i) => ({
                ...b,
                id: ids[i],
                stock: moves[i].stock,
                inFlight: moves[i].inFlight.reduce((n, m) => n + m.units, 0),
              })),
          );
    return {
      initialStock: read.reduce((sum, b) => sum + b.initialStock, 0),
      stock: read.reduce((sum, b) => sum + b.stock + b.inFlight, 0),
      orders: sumOrders(read.map((b) => b.orders)),
      buckets: read.map(({ id, initialStock, stock, orders, inFlight, lock }) => ({
        id,
        initialStock,
        stock,
        orders: orders.written,
        inFlight,
        lock,
      })),
    };
  }

  /** One bucket's share of the stock, its orders by state and its lock, read as bucket 0's are. */
  private async bucketOrders(
    id: string,
  ): Promise<{ initialStock: number; orders: LiveOrders; lock: LiveBucket['lock'] }> {
    const k = this.keys.product(id);
    const replies = await execAll(
      this.readLock(
        this.redis
          .multi()
          .hmget(k.meta, 'initialStock', ...LIVE_ORDERS_META)
          .hlen(k.states)
          .zcard(k.deadlines),
        k,
      ),
    );
    const [[initial, ...counts], written, reserved] = replies as [(string | null)[], number, number];
    return {
      initialStock: Number(initial ?? 0),
      orders: liveOrders(written, reserved, counts),
      lock: this.lockOf(replies.slice(3)),
    };
  }

  /** Adds the reads of a product's (or bucket's) lock, as the strategy keeps it (LOCK_VIEWS), to `batch`. */
  private readLock(batch: ChainableCommander, k: ProductKeys): ChainableCommander {
    const view = LOCK_VIEWS[this.config.lockStrategy];
    if (view.read === 'string') batch.get(k.lock);
    if (view.read !== null) batch.pttl(k.lock);
    return batch;
  }

  /** The lock as readLock()'s replies say: null when its key is free (PTTL -2) or not read. */
  private lockOf(replies: readonly unknown[]): LiveLock | null {
    const view = LOCK_VIEWS[this.config.lockStrategy];
    if (view.read === null) return null;
    const ttl = replies[replies.length - 1] as number;
    // PTTL: -2 no key (free), -1 a key without a TTL (setnx-no-ttl's failure).
    if (ttl === -2) return null;
    return { holderPid: holderPid(view.read === 'string' ? (replies[0] as string | null) : null), ttlMs: ttl };
  }

  private async poll(productId: string): Promise<void> {
    const watch = this.watches.get(productId);
    // A read slower than the interval is not stacked behind another.
    if (!watch || watch.reading || performance.now() < watch.nextReadAt) return;
    watch.reading = true;
    try {
      const event = await this.read(productId);
      // A product without a sale is read less often; within a second of its start, as often again.
      watch.nextReadAt = event.initialStock === null ? nextNoSaleRead() : 0;
      const data = message(event);
      for (const subscriber of watch.subscribers) subscriber.next(data);
    } catch (err) {
      this.logger.debug(`live read of ${productId} failed: ${(err as Error).message}`);
    } finally {
      watch.reading = false;
    }
  }
}

/** When to read a product without a sale next: a second on (half a tick early, so a tick is not skipped by jitter). */
function nextNoSaleRead(): number {
  return performance.now() + NO_SALE_POLL_MS - POLL_INTERVAL_MS / 2;
}

/** Serialized once per poll, not once per watcher. */
function message(event: LiveEvent): MessageEvent {
  return { data: JSON.stringify(event), retry: RETRY_MS };
}

/**
 * Once Nest has ended the response (the subscriber completed), ends its connection
 * too: a keep-alive socket that went idle after the server began closing would
 * otherwise wait out its keep-alive timeout and hold the drain open.
 */
function countUp(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

function countDown(counts: Map<string, number>, key: string): void {
  const left = (counts.get(key) ?? 1) - 1;
  if (left > 0) counts.set(key, left);
  else counts.delete(key);
}

function endConnection(response: ServerResponse): void {
  const socket = response.socket;
  if (!socket) return;
  if (response.writableFinished) socket.end();
  else response.once('finish', () => socket.end());
  setTimeout(() => socket.destroy(), END_GRACE_MS).unref();
}
