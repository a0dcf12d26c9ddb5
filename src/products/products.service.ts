import { Inject, Injectable, Optional } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster } from 'ioredis';
import type { RedisClient } from '../redis/create-client';
import { ORDERS_CONFIG } from '../orders/orders.config';
import { SETTLEMENT_CONFIG } from '../settlement/settlement.config';
import { ConfigsOf, configView } from '../settings/setting';
import { STRATEGY_CONFIG, strategyFamily } from '../settings/strategy.config';
import {
  BucketsFixedError,
  OrdersUnsettledError,
  RedisNoPermissionError,
  ReservationsOpenError,
  SaleHasOrdersError,
  SaleHasReservationsError,
  SaleNotSettledError,
  StrategyMismatchError,
  UnknownProductError,
} from '../errors/errors';
import { DEFAULT_PASS_TTL_MS } from '../sale/sale-limits';
import { bucketSlot, bucketsOf, listOf, placeBuckets } from '../sale/buckets';
import { BUCKETS_TRUST_MS, Escrow } from '../orders/escrow';
import { DoorRefusals } from '../door/door-refusals';
import { WaitingRoom } from '../door/waiting-room';
import { OrderOutcomes } from '../orders/order-outcomes';
import { PurchasePath } from '../orders/purchases/purchase-path';
import { KeyLayout } from '../redis/key-layout';
import {
  closeSale,
  deleteProduct,
  deleteProductKeys,
  productRead,
  productReadKeys,
  resetSale,
  resetSaleKeys,
} from '../redis/lua-scripts';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { SettlementLag } from '../settlement/settlement-lag';
import { Settler } from '../settlement/settler';
import { PurchaseTelemetry } from '../telemetry/purchase-telemetry';
import { ClosedSale, DeletedProduct, Product, ProductBucket, ProductPage } from './product';
import { saleWindow } from './sale-window';
import { exclusiveAll, oneChangeAtATime } from './one-change';

/** What a sale's start and reset read: the strategy's family, whether orders settle, the payment timeout. */
export const PRODUCTS_CONFIG = configView('products', STRATEGY_CONFIG, SETTLEMENT_CONFIG, ORDERS_CONFIG);

/** How long a close waits for settlement to take in the sale's last events (its cancels). */
export const CLOSE_SETTLE_WAIT_MS = 10_000;
/** How often it looks meanwhile. */
const CLOSE_SETTLE_POLL_MS = 100;
/** Order states read per HSCAN while a close looks for reservations. */
const CLOSE_SCAN_COUNT = 1_000;

@Injectable()
export class ProductsService {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly purchases: PurchasePath,
    private readonly keys: KeyLayout,
    private readonly telemetry: PurchaseTelemetry,
    @Inject(PRODUCTS_CONFIG.token) private readonly config: ConfigsOf<typeof PRODUCTS_CONFIG.sections>,
    private readonly door: DoorRefusals,
    private readonly room: WaitingRoom,
    private readonly outcomes: OrderOutcomes,
    private readonly settlement: SettlementLag,
    private readonly escrow: Escrow,
    @Optional() private readonly settler?: Settler,
  ) {}

  /**
   * Starts or restarts a sale: stock, limit, and empty buyers and order log, in one
   * script, run while no purchase of the product is between its read and its write
   * (under a lock, holding the product's lock, which the release then clears), so
   * that no purchase decided in the old sale lands in the new one. The dashboard's
   * counts of the old sale go too: the live hash in the script, this instance's
   * unpublished ones right before it, and other instances' when they publish them
   * (the new sale id the script returns tells them apart).
   * The orders of the current sale are discarded only when `discardOrders` says so
   * (else SaleHasOrdersError, nothing changed), and the sale records this instance's
   * strategy family: instances of another refuse to sell it (strategyFamily()), and to
   * restart it unless `switchStrategy` says so (else StrategyMismatchError).
   */
  async startSale(
    productId: string,
    stock: number,
    perUserLimit: number,
    options: {
      paymentTimeoutMs?: number;
      discardOrders?: boolean;
      switchStrategy?: boolean;
      startsAt?: string;
      endsAt?: string;
      queue?: { admitPerSecond: number; passTtlMs?: number };
      /** Escrow buckets (src/sale/buckets.ts): fixed at the product's first sale; omitted, as they are (1 for a new product). */
      buckets?: number;
    } = {},
  ): Promise<Product> {
    const { startsAt, endsAt } = saleWindow(options.startsAt, options.endsAt);
    const family = strategyFamily(this.config.lockStrategy);
    return oneChangeAtATime(this.redis, this.keys.product(productId).admin, async () => {
      const { buckets, list } = await this.bucketsFor(productId, options.buckets);
      // The settler and the expiry sweeper find the product here: listed before its sale
      // starts, so no order of it is ever unlisted (a product listed without a sale is skipped).
      await this.redis.sadd(this.keys.products, productId);
      // Settled here, or by a settler elsewhere (another instance, `npm run settle`): the
      // reset makes the order log with its consumer group either way.
      const settled = this.config.databaseUrl !== null || (await this.redis.exists(this.keys.settling)) === 1;
      // Several buckets: one epoch for this sale in every bucket (the moves check it), its
      // list part kept from the last sale (a purchase checks that: listOf()), each bucket
      // checked before any is reset, bucket 0 (which lists the others) reset last.
      const epoch = buckets.length > 1 ? `${list}.${randomUUID()}` : '';
      const reset = (bucket: number, checkOnly: boolean) =>
        resetSale
          .run(
            this.redis,
            resetSaleKeys(this.keys.product(buckets[bucket])),
            share(stock, buckets.length, bucket),
            perUserLimit,
            options.discardOrders ? '1' : '0',
            family,
            options.switchStrategy ? '1' : '0',
            options.paymentTimeoutMs ?? this.config.paymentTimeoutMs,
            startsAt ?? '',
            endsAt ?? '',
            options.queue?.admitPerSecond ?? '',
            options.queue ? (options.queue.passTtlMs ?? DEFAULT_PASS_TTL_MS) : '',
            settled ? '1' : '0',
            epoch,
            bucket === 0 ? buckets.slice(1).join(' ') : '',
            checkOnly ? '1' : '0',
          )
          .then((reply) => refusal(productId, family, reply));
      await exclusiveAll(this.purchases, buckets, async () => {
        if (buckets.length > 1) for (let b = 0; b < buckets.length; b++) await reset(b, true);
        let value = 0;
        for (let b = buckets.length - 1; b >= 0; b--) value = await reset(b, false);
        this.telemetry.saleRestarted(productId);
        // What this instance's door learnt of the last sale is not the new one's (other
        // instances forget it within DOOR_TRUST_MS).
        this.forgetLearnt(productId);
        this.escrow.forget(productId);
        this.telemetry.saleStarted(productId, value);
      });
      // Listed again now that the sale exists: a DELETE of the product that unlisted it
      // between the first SADD and the reset, after its own check found no sale, would
      // otherwise leave a sale unlisted (unlist()).
      await this.redis.sadd(this.keys.products, productId);
      return this.get(productId);
    });
  }

  /** Forgets what this instance learnt of a product's sale: its door's refusals, its waiting room's counts. */
  private forgetLearnt(productId: string): void {
    this.door.forget(productId);
    this.room.forget(productId);
  }

  /**
   * The bucket ids of a product's sale: those it has (its buckets are fixed for its
   * life: another count is BUCKETS_FIXED), or for a new product `asked` buckets placed on
   * distinct masters where the cluster has them (placeBuckets()).
   */
  private async bucketsFor(productId: string, asked: number | undefined): Promise<{ buckets: string[]; list: string }> {
    const [known, field, epoch] = await this.redis.hmget(
      this.keys.product(productId).meta,
      'initialStock',
      'buckets',
      'epoch',
    );
    const buckets =
      known !== null
        ? bucketsOf(productId, field)
        : placeBuckets(productId, asked ?? 1, (slot) =>
            this.redis instanceof Cluster ? (this.redis.slots as (string[] | undefined)[])[slot]?.[0] : undefined,
          );
    if (asked !== undefined && asked !== buckets.length) throw new BucketsFixedError(productId, buckets.length, asked);
    // The buckets as placed: named anew only when they are (a new product, or after a
    // DELETE), or first named (a sale of the version before lists).
    const kept = known !== null ? listOf(epoch ?? '') : null;
    return { buckets, list: buckets.length === 1 ? '' : (kept ?? randomUUID()) };
  }

  /**
   * Retires a product: refused while PostgreSQL lacks any of its orders or one is still
   * reserved (ORDERS_UNSETTLED, RESERVATIONS_OPEN; where the prefix does not settle, its
   * orders go only with `discardOrders`), else every key of its sale deleted, in one
   * script (delete-product-11.lua) run while no purchase of it is between its read and
   * its write (exclusive(), as a reset): a purchase lands before it, and is counted, or
   * finds no product. Then it leaves the products set (unlist()). Its orders stay in
   * PostgreSQL.
   */
  async deleteProduct(
    productId: string,
    options: { discardOrders?: boolean; switchStrategy?: boolean } = {},
  ): Promise<DeletedProduct> {
    const family = strategyFamily(this.config.lockStrategy);
    const settled = this.config.databaseUrl !== null || (await this.redis.exists(this.keys.settling)) === 1;
    return oneChangeAtATime(this.redis, this.keys.product(productId).admin, async () => {
      const buckets = await this.escrow.buckets(productId, true);
      const remove = (bucket: string, checkOnly: boolean) =>
        deleteProduct.run(
          this.redis,
          deleteProductKeys(this.keys.product(bucket)),
          options.discardOrders ? '1' : '0',
          family,
          options.switchStrategy ? '1' : '0',
          settled ? '1' : '0',
          checkOnly ? '1' : '0',
        );
      let keys = 0;
      let discardedOrders = 0;
      // Every bucket checked before any is deleted, under all their exclusions: refused,
      // the DELETE changes nothing. Bucket 0 last: while it stands the product is known.
      await exclusiveAll(this.purchases, buckets, async () => {
        const steps = buckets.length > 1 ? [true, false] : [false];
        for (const checkOnly of steps) {
          for (let b = buckets.length - 1; b >= 0; b--) {
            const reply = await remove(buckets[b], checkOnly);
            // A bucket already gone (a DELETE that crashed half-way): the rest goes now.
            if (reply[0] === 'UNKNOWN_PRODUCT' && b > 0) continue;
            // Unknown: listed still if a crash came between a DELETE's two steps; a retry unlists it.
            if (reply[0] === 'UNKNOWN_PRODUCT') {
              await this.unlist(productId);
              throw new UnknownProductError(productId);
            }
            if (reply[0] === 'STRATEGY_MISMATCH') throw new StrategyMismatchError(productId, reply[1], family);
            if (reply[0] === 'UNSETTLED') throw new OrdersUnsettledError(productId, reply[1], false);
            if (reply[0] === 'ONLY_IN_REDIS') throw new OrdersUnsettledError(productId, reply[1], true);
            if (reply[0] === 'RESERVATIONS_OPEN') throw new ReservationsOpenError(productId, reply[1]);
            if (checkOnly) continue;
            // The escrow's logs go with the bucket (a move of its sale still in flight lands nowhere now).
            const k = this.keys.product(buckets[b]);
            keys += reply[1] + (await this.redis.del(k.moves, k.landed));
            discardedOrders += reply[2];
          }
        }
      });
      this.escrow.forget(productId);
      // Other instances trust the bucket list they read for BUCKETS_TRUST_MS: the id is
      // free for a new sale (another bucket count) only once none can still sell by the
      // old one. The change's mark is held meanwhile, so no PUT starts before.
      await sleep(BUCKETS_TRUST_MS);
      // What this instance's door learnt of the sale (a sell-out) is of no product now: a
      // purchase hears UNKNOWN_PRODUCT at once here, within DOOR_TRUST_MS elsewhere. (The
      // dashboard's unpublished counts need nothing: live-publish-2.lua writes no product
      // without a meta hash.)
      this.forgetLearnt(productId);
      await this.unlist(productId);
      return { id: productId, keys, discardedOrders };
    });
  }

  /**
   * Takes a product without a sale out of the products set: a command of its own, since
   * on a cluster the set is a key in another slot than the product's. Listed again if a
   * sale started meanwhile (a PUT lists the product before its reset and again after it),
   * so no sale is left unlisted whatever the order of the two.
   */
  private async unlist(productId: string): Promise<void> {
    await this.redis.srem(this.keys.products, productId);
    if ((await this.redis.exists(this.keys.product(productId).meta)) === 1) {
      await this.redis.sadd(this.keys.products, productId);
    }
  }

  /**
   * Closes a sale so that it can be restarted without losing an order: ends it now by
   * Redis's clock (close-sale-1.lua; every write judges the window, so nothing is sold
   * after), cancels each reservation still open (its units back in stock once, its
   * cancel event in the order log, exactly as a buyer's cancel), then, with settlement
   * on, waits up to CLOSE_SETTLE_WAIT_MS for PostgreSQL to hold every event of the
   * sale (not while settlement is failing). A PUT with discardOrders then restarts it (it still refuses while anything is
   * unsettled). Paid orders stay paid. Closing a closed sale again changes nothing.
   */
  async closeSale(productId: string): Promise<ClosedSale> {
    return oneChangeAtATime(this.redis, this.keys.product(productId).admin, async () => {
      const buckets = await this.escrow.buckets(productId, true);
      // Every bucket ended before any reservation is cancelled: nothing is sold after the
      // end this close answers, in any bucket (each judged by its own shard's clock).
      for (const bucket of buckets) {
        const [status] = await closeSale.run(this.redis, [this.keys.product(bucket).meta], '');
        if (status === 'UNKNOWN_PRODUCT') throw new UnknownProductError(productId);
      }
      // What this instance's door learnt (a sell-out) is not what it must say now (ended).
      this.forgetLearnt(productId);
      let cancelled = 0;
      // A reservation paid, expired or cancelled by its buyer between the scan and this
      // cancel keeps that outcome, and is not counted.
      for (const bucket of buckets) {
        for await (const orderId of this.reservations(this.keys.product(bucket).states)) {
          if (await this.outcomes.release(orderId)) cancelled++;
        }
      }
      // Settled here or by a settler elsewhere (the prefix marked): its lag is Redis's to tell.
      const settles = this.config.databaseUrl !== null || (await this.redis.exists(this.keys.settling)) === 1;
      const until = performance.now() + CLOSE_SETTLE_WAIT_MS;
      let unsettled: number | null = null;
      if (settles) {
        unsettled = 0;
        for (const bucket of buckets) unsettled += await this.settled(bucket, until);
      }
      return { product: await this.get(productId), cancelled, unsettled };
    });
  }

  /** The orders of a states hash still reserved (`R|...`), a bounded HSCAN page at a time. */
  private async *reservations(states: string): AsyncGenerator<string> {
    let cursor = '0';
    do {
      const [next, flat] = await this.redis.hscan(states, cursor, 'COUNT', CLOSE_SCAN_COUNT);
      for (let i = 0; i + 1 < flat.length; i += 2) if (flat[i + 1].startsWith('R|')) yield flat[i];
      cursor = next;
    } while (cursor !== '0');
  }

  /** Whether this instance's settlement is failing for this product (or wholly: its migrations). */
  private cannotSettle(productId: string): boolean {
    if (!this.settler || this.settler.status().failing === null) return false;
    return this.settler.failingProducts.size === 0 || this.settler.failingProducts.has(productId);
  }

  /**
   * Waits (bounded) until the product's order log is settled; the entries still unsettled
   * (0: all settled). No wait while this instance's settlement is failing (PostgreSQL
   * away): nothing would come of it, and the PUT refuses until it is mended.
   */
  private async settled(productId: string, until: number): Promise<number> {
    for (;;) {
      const { unsettled } = await this.settlement.forProduct(productId);
      if (unsettled === 0 || this.cannotSettle(productId) || performance.now() >= until) return unsettled;
      await sleep(CLOSE_SETTLE_POLL_MS);
    }
  }

  /**
   * One page of the catalog: one SSCAN of the products set with `limit` as its COUNT,
   * never the whole set in one reply, then each product's sale read as GET reads it
   * (one read-only script each, sent together). SCAN's guarantees are the page's: a
   * product listed for the whole walk is listed at least once, maybe twice (the set
   * rehashed between pages: callers dedupe by id); COUNT is a hint, and a set still
   * stored compact (under set-max-listpack-entries, or set-max-intset-entries when every
   * id is an integer) comes whole in one page. A product listed whose sale is gone (or
   * not started) is left out.
   */
  async list(limit: number, cursor = '0'): Promise<ProductPage> {
    const [next, ids] = await this.redis.sscan(this.keys.products, cursor, 'COUNT', limit);
    const read = await Promise.all(
      [...new Set(ids)].map((id) =>
        this.get(id).catch((err: unknown) => {
          if (err instanceof UnknownProductError) return null;
          throw err;
        }),
      ),
    );
    return { items: read.filter((p): p is Product => p !== null), cursor: next === '0' ? null : next };
  }

  async get(productId: string): Promise<Product> {
    const k = this.keys.product(productId);
    // One read-only script: one sale's fields, never half of two, and answered while
    // Redis refuses writes for memory (a MULTI is refused whole then).
    const read = await productRead.run(this.redis, productReadKeys(k), '');
    const [initialStock, perUserLimit, paymentTimeoutMs, startsAt, endsAt, queueRate, passTtlMs, others] = read;
    const [stock, orders, now] = [read[8], Number(read[9]), Number(read[10])];
    const instant = (ms: string | null) => (ms === null ? null : new Date(Number(ms)).toISOString());
    if (initialStock === null || perUserLimit === null || stock === null) throw new UnknownProductError(productId);
    const sale = { initialStock: Number(initialStock), stock: Number(stock), orders };
    const buckets = bucketsOf(productId, others);
    // Several buckets: the product's figures are their sums, the units in flight between them in its stock.
    if (buckets.length > 1) Object.assign(sale, sum(await this.buckets(productId, buckets)));
    return {
      id: productId,
      initialStock: sale.initialStock,
      stock: sale.stock,
      sold: sale.initialStock - sale.stock,
      orders: sale.orders,
      perUserLimit: Number(perUserLimit),
      paymentTimeoutMs: paymentTimeoutMs === null ? null : Number(paymentTimeoutMs),
      startsAt: instant(startsAt),
      endsAt: instant(endsAt),
      queue: queueRate === null ? null : { admitPerSecond: Number(queueRate), passTtlMs: Number(passTtlMs) },
      buckets: buckets.length,
      // Redis's clock, the one the window is judged by (the shard's that holds the product).
      serverTime: new Date(now).toISOString(),
    };
  }

  /**
   * Each bucket of a product as it is now (GET /api/products/:id/buckets, admin): its
   * id, slot, share of the stock, stock, orders, and the units it has in flight to others.
   */
  async buckets(productId: string, ids?: readonly string[]): Promise<ProductBucket[]> {
    if (!ids) await this.get(productId);
    const buckets = ids ?? (await this.escrow.buckets(productId, true));
    const moves = await this.escrow.read(buckets);
    return Promise.all(
      buckets.map(async (id, i) => {
        const read = await productRead.run(this.redis, productReadKeys(this.keys.product(id)), '');
        return {
          id,
          slot: bucketSlot(id),
          initialStock: Number(read[0] ?? 0),
          stock: Number(read[8] ?? 0),
          orders: Number(read[9]),
          inFlight: moves[i].inFlight.reduce((n, m) => n + m.units, 0),
        };
      }),
    );
  }
}

/** A bucketed product's figures: the sums of its buckets', units in flight counted in its stock. */
function sum(buckets: readonly ProductBucket[]): { initialStock: number; stock: number; orders: number } {
  return buckets.reduce(
    (s, b) => ({
      initialStock: s.initialStock + b.initialStock,
      stock: s.stock + b.stock + b.inFlight,
      orders: s.orders + b.orders,
    }),
    { initialStock: 0, stock: 0, orders: 0 },
  );
}

/** Bucket `b`'s share of `stock` split over `n` buckets: the remainder goes to the first ones. */
export function share(stock: number, n: number, b: number): number {
  return Math.floor(stock / n) + (b < stock % n ? 1 : 0);
}

/** reset-sale-10.lua's refusal as the error a PUT answers, or the new sale's id. */
function refusal(productId: string, family: string, reply: Awaited<ReturnType<typeof resetSale.run>>): number {
  if (reply[0] === 'HAS_ORDERS') throw new SaleHasOrdersError(productId, reply[1]);
  if (reply[0] === 'NOT_SETTLED') throw new SaleNotSettledError(productId, reply[1]);
  if (reply[0] === 'NO_PERMISSION') throw new RedisNoPermissionError(false);
  if (reply[0] === 'HAS_RESERVATIONS') throw new SaleHasReservationsError(productId, reply[1]);
  if (reply[0] === 'STRATEGY_MISMATCH') throw new StrategyMismatchError(productId, reply[1], family);
  return reply[1];
}
