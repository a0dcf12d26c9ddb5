import { BeforeApplicationShutdown, Inject, Injectable, Optional } from '@nestjs/common';
import type { RedisClient } from '../../redis/create-client';
import { saleClock } from '../../settings/lessons.config';
import { strategyFamily } from '../../settings/strategy.config';
import { PURCHASE_CONFIG, PurchaseConfig } from '../orders.config';
import { IdempotencyKeyInUseError, InsufficientStockError, LockTimeoutError, SoldOutError } from '../../errors/errors';
import { Hold, Lock } from '../../locks/lock';
import { KeyLayout, ProductKeys } from '../../redis/key-layout';
import { REDIS_CLIENT } from '../../redis/redis.constants';
import { Metrics } from '../../telemetry/metrics';
import { FaultStop } from '../fault-stop';
import { acknowledge, newOrderId, Order, OrderRequest } from '../order';
import { refusal } from '../sale-rules';
import {
  acquireReadArgs,
  buyerState,
  readSale,
  SaleRead,
  saleReadOf,
  skippedError,
  stillClaimed,
  writeOrders,
} from '../sale-store';
import { LockedPurchases } from './purchase-path';

/** Most buyers served by one hold: bounds the write and keeps the hold far inside the TTL. */
export const MAX_BATCH = 256;

/**
 * How long what a hold read stays good enough to send the next batch's unlocked read
 * only once its lock turns out taken rather than before it (ms): never to decide,
 * which the next hold does again.
 */
export const PLAINLY_ON_MS = 1_000;

/** A buyer waiting for its product's next batch; settled exactly once. */
interface Buyer {
  readonly order: OrderRequest;
  /** performance.now() by which this buyer must hold the lock, or hear LOCK_TIMEOUT. */
  readonly deadline: number;
  /** Answers LOCK_TIMEOUT at the deadline, wherever the buyer is waiting; cleared once its hold begins. */
  timer?: NodeJS.Timeout;
  /** Taken by a hold: from then only that hold's outcome answers it (not a read that went out while it waited). */
  held?: boolean;
  settled: boolean;
  resolve(order: Order): void;
  reject(err: unknown): void;
}

/**
 * Lock coalescing (group commit), the purchase path of `lock`, `fenced` and
 * `redlock`: the buyers of one product that arrive in this process while a hold is
 * running wait here, and the next hold serves all of them (up to MAX_BATCH) at once:
 *
 * 1. one unlocked read for the whole batch, which answers every final refusal
 *    (unknown product, LIMIT_REACHED, SOLD_OUT, INSUFFICIENT_STOCK: true when read;
 *    stock rises and a buyer's count falls only when a reservation is cancelled or
 *    expires, after which the buyer may try again), so the sold-out tail never takes
 *    the lock. While the sale is plainly on (plainlyOn(): this process's last hold,
 *    under PLAINLY_ON_MS ago, left more units than the batch asks for, in the window,
 *    and the rules refuse none of its buyers but by their own count), the read goes out
 *    only once the lock turns out taken (UsingOptions.onWait), not before it: its
 *    refusals still come at once while the lock is busy, and a free lock is held a
 *    round trip sooner, its hold's read the batch's only one. A batch that
 *    finds the stock gone elsewhere may take the lock to hear it, once: its hold reads 0;
 * 2. for the rest, take the product lock once (owner token, TTL, compare-and-delete
 *    release, exactly as for one buyer), read again (a fenced lock reads in the
 *    script that takes it: Hold.read), apply the sale rules to the buyers in arrival
 *    order against the running stock and per-user counts, and write every accepted
 *    order in one round trip (a MULTI, or the fenced script under a fenced lock); then
 *    release.
 *
 * Exclusion is unchanged: nothing is written outside a hold, and all of a hold's
 * writes are checked against what Redis said inside it. A buyer refused because an
 * earlier buyer of the same batch took the last units hears it only after those
 * units are written, and only if the stock the write left is short: a failed write,
 * or a unit returned between the read and the write (returns take no lock), sends it
 * to the next hold instead of leaving a false SOLD_OUT behind (the history checker's
 * false refusal, docs/history.md).
 */
@Injectable()
export class BatchedPurchases extends LockedPurchases implements BeforeApplicationShutdown {
  /** Per product: the buyers waiting for the next batch. An entry exists while a drain runs. */
  private readonly queues = new Map<string, Buyer[]>();
  private readonly waitMs: number;
  /** SALE_CLOCK=app: the naive window check (saleClock()). */
  private readonly clock: ((redisNow: number) => number) | undefined;
  /** Per product (its stock key): what its last hold here read, with the stock its decisions left, and when. */
  private readonly lastSeen = new Map<string, { readonly sale: NonNullable<SaleRead['sale']>; readonly at: number }>();
  /** The drains running: a shutdown waits for them, so no hold is left to its TTL by a closed connection. */
  private readonly draining = new Set<Promise<void>>();

  constructor(
    lock: Lock,
    keys: KeyLayout,
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    @Inject(PURCHASE_CONFIG.token) config: PurchaseConfig,
    private readonly faults: FaultStop,
    @Optional() private readonly metrics?: Metrics,
  ) {
    super(lock, keys, strategyFamily(config.lockStrategy));
    this.waitMs = config.lockWaitMs;
    this.clock = saleClock(config);
  }

  purchase(order: OrderRequest): Promise<Order> {
    return new Promise<Order>((resolve, reject) => {
      const buyer: Buyer = {
        order,
        deadline: performance.now() + this.waitMs,
        settled: false,
        resolve: (o) => settle(buyer, () => resolve(o)),
        reject: (err) => settle(buyer, () => reject(err)),
      };
      // A buyer answers by its deadline even when what it waits behind hangs (a
      // paused Redis holds the batch ahead until the command timeout). With
      // LOCK_WAIT_MS=0 ("try once") there is no wait to bound: the one attempt answers.
      if (this.waitMs > 0) {
        buyer.timer = setTimeout(() => buyer.reject(new LockTimeoutError(this.waitMs)), this.waitMs);
      }
      const queue = this.queues.get(order.productId);
      if (queue) {
        queue.push(buyer);
        return;
      }
      this.queues.set(order.productId, [buyer]);
      const drain = this.drain(order.productId);
      this.draining.add(drain);
      void drain.finally(() => this.draining.delete(drain));
    });
  }

  /** Serves the product's queue batch after batch until it is empty. Never throws. */
  private async drain(productId: string): Promise<void> {
    const queue = this.queues.get(productId)!;
    const k = this.keys.product(productId);
    while (queue.length > 0) {
      const batch = queue.splice(0, MAX_BATCH);
      try {
        await this.serve(k, batch);
      } catch (err) {
        for (const buyer of batch) buyer.reject(err);
      }
    }
    this.queues.delete(productId);
  }

  private async serve(k: ProductKeys, batch: Buyer[]): Promise<void> {
    // Buyers whose deadline passed behind earlier batches were answered by their timers.
    // Unlocked: each buyer alone against what Redis says now. Only refusals are
    // trusted (they are final); a "yes" is decided again under the lock.
    const waiting = unsettled(batch);
    if (waiting.length === 0) return;
    const preRead = async () => {
      const seen = await readSale(
        this.redis,
        k,
        this.family,
        waiting.map((b) => b.order.userId),
        [],
        this.clock,
      );
      // What a hold saw, this read brings up to date: a sell-out elsewhere ends "plainly
      // on" at once, and the next batch reads first. (Only a hold starts it.)
      if (this.lastSeen.has(k.stock)) this.saw(k, seen.sale, performance.now());
      waiting.forEach((buyer, i) => {
        // A buyer the hold has taken is answered by the hold alone.
        if (buyer.held) return;
        const no = refusal(buyer.order, buyerState(seen, i));
        if (no) buyer.reject(no);
      });
    };
    // While the sale is plainly on, the read is not sent before the acquisition: only
    // once the lock turns out to be taken (onWait), so its refusals still come at once
    // while another holds it, and a free lock is held one round trip sooner, its hold's
    // read the only one. Once every buyer is refused, the wait for the lock stops.
    let stop: AbortController | undefined;
    let onWait: (() => void) | undefined;
    let waitRead: Promise<void> | undefined;
    if (this.plainlyOn(k, waiting)) {
      const controller = (stop = new AbortController());
      onWait = () => {
        waitRead = preRead().then(
          () => {
            if (unsettled(waiting).length === 0) controller.abort(new Error('every buyer of the batch was refused'));
          },
          // The read under the lock decides the same, and says what failed.
          () => undefined,
        );
      };
    } else {
      await preRead();
    }
    const candidates = unsettled(waiting);
    if (candidates.length === 0) return;
    let answers: (() => void)[];
    try {
      answers = await this.lock.using(k.lock, (hold) => this.buyAll(k, candidates, hold), {
        // Waited for as long as any buyer of the batch may wait (FIFO: the last came
        // last); each earlier one hears LOCK_TIMEOUT from its own timer at its own deadline.
        deadline: candidates[candidates.length - 1].deadline,
        signal: stop?.signal,
        onWait,
        // A lock that can (fenced) takes the hold's read in the step that takes the lock.
        readAtAcquire: acquireReadArgs(
          candidates.map((b) => b.order.userId),
          keyedOf(candidates).map((b) => b.order.claim!.key),
        ),
      });
    } catch (err) {
      // The lock not had (LOCK_WAIT_MS=0's one try failed at once): the read sent on the
      // wait answers its final refusals first, as it would have beside the acquisition.
      await waitRead;
      throw err;
    }
    // Answered once the lock is released, as a single buyer would be: by the time a
    // buyer sees its answer, its hold is over. (A refusal of the read sent while the
    // batch waited may come first: it wrote nothing, and a shutdown waits for the hold
    // anyway, beforeApplicationShutdown().)
    for (const answer of answers) answer();
  }

  /**
   * Waits for every batch in hand (those that begin meanwhile too): its hold released
   * before the app closes its Redis connection, even where its buyers were answered
   * first (refused by the read sent while they waited for the lock).
   */
  async beforeApplicationShutdown(): Promise<void> {
    while (this.draining.size > 0) await Promise.all([...this.draining]);
  }

  /** Notes what a read (unlocked, or under a hold with its decisions' stock) saw of the sale, for plainlyOn(). */
  private saw(k: ProductKeys, sale: SaleRead['sale'], at: number): void {
    if (sale) this.lastSeen.set(k.stock, { sale, at });
    else this.lastSeen.delete(k.stock);
  }

  /**
   * Whether the unlocked read could only refuse buyers by their per-user limit: the
   * last read here (a hold's, or a batch's unlocked one) saw the sale under
   * PLAINLY_ON_MS ago with more units left than these
   * buyers ask for, and by what it read (its Redis clock moved on by the time since) the
   * rules refuse none of them with a count of 0. What it cannot know (a buyer's count,
   * units sold by other processes since) the read under the lock decides, as always.
   */
  private plainlyOn(k: ProductKeys, buyers: readonly Buyer[]): boolean {
    const last = this.lastSeen.get(k.stock);
    if (!last) return false;
    const age = performance.now() - last.at;
    if (age > PLAINLY_ON_MS) return false;
    const state = { ...last.sale, now: last.sale.now + age, bought: 0 };
    let units = 0;
    for (const { order } of buyers) {
      if (refusal(order, state) !== null) return false;
      units += order.quantity;
    }
    return units <= last.sale.stock;
  }

  /**
   * The critical section for a batch: read, decide in arrival order, write all in
   * one round trip. Returns the answers to give, not given yet.
   */
  private async buyAll(k: ProductKeys, batch: Buyer[], hold: Hold): Promise<(() => void)[]> {
    // Those who timed out while the lock was being taken are answered already. The
    // rest stop their clocks: from here their order may be written, so only the
    // outcome of this hold may answer them.
    const buyers = unsettled(batch);
    for (const buyer of buyers) {
      clearTimeout(buyer.timer);
      buyer.held = true;
    }
    // A hold whose buyers all timed out while it was being taken served nobody: not a
    // batch (its wait and hold are still in the lock's histograms).
    if (buyers.length === 0) return [];
    this.metrics?.batchServed(buyers.length);
    const keyed = keyedOf(buyers);
    const read = hold.read
      ? narrowed(saleReadOf(hold.read, k, this.family, this.clock), batch, buyers)
      : await readSale(
          this.redis,
          k,
          this.family,
          buyers.map((b) => b.order.userId),
          keyed.map((b) => b.order.claim!.key),
          this.clock,
        );
    const readAt = performance.now();
    // A keyed buyer whose claim is no longer its own (another request decides that
    // key) is left out before anything is decided, so no one after it is refused
    // for units it would not take.
    const lapsed = new Set(keyed.filter((b, i) => !stillClaimed(read.claims[i], b.order.claim!)));
    // The rules, buyer after buyer, against the stock and counts the earlier buyers
    // of this batch leave behind.
    let stock = read.sale?.stock ?? 0;
    const owned = new Map<string, number>();
    const accepted: { buyer: Buyer; orderId: string; remaining: number }[] = [];
    const answers: (() => void)[] = [];
    // Refused only for the units earlier buyers of this batch take: see crowdedOut().
    const crowded: Buyer[] = [];
    buyers.forEach((buyer, i) => {
      if (lapsed.has(buyer)) {
        answers.push(() => buyer.reject(new IdempotencyKeyInUseError(0)));
        return;
      }
      const { userId, quantity } = buyer.order;
      const bought = owned.get(userId) ?? read.bought[i];
      const no = refusal(buyer.order, read.sale && { ...read.sale, stock, bought });
      if ((no instanceof SoldOutError || no instanceof InsufficientStockError) && read.sale!.stock >= quantity) {
        crowded.push(buyer);
        return;
      }
      if (no) {
        answers.push(() => buyer.reject(no));
        return;
      }
      stock -= quantity;
      owned.set(userId, bought + quantity);
      accepted.push({ buyer, orderId: newOrderId(buyer.order.productId), remaining: stock });
    });
    this.saw(k, read.sale && { ...read.sale, stock }, readAt);
    if (accepted.length === 0) return answers;
    // The hold may have outlived its TTL while we read: then writing could oversell.
    hold.assertValid();
    this.faults.reached('before-write');
    const remaining = await writeOrders(
      this.redis,
      k,
      this.family,
      accepted.map(({ buyer, orderId, remaining: left }) => ({ order: buyer.order, orderId, remaining: left })),
      hold.fence,
      this.clock,
    );
    accepted.forEach(({ buyer, orderId }, i) => {
      const left = remaining[i];
      // Not written: its Idempotency-Key's claim passed to another request, or its
      // Admission-Pass lapsed while it waited for the lock.
      if (typeof left === 'string') answers.push(() => buyer.reject(skippedError(left)));
      else answers.push(() => buyer.resolve(acknowledge(buyer.order, orderId, left)));
    });
    // The stock the write left (each written order's reply is the stock after it).
    const after = remaining.findLast((left): left is number => typeof left === 'number');
    answers.push(...this.crowdedOut(crowded, after));
    return answers;
  }

  /**
   * The answers of buyers refused only for the units earlier buyers of their batch took.
   * Their SOLD_OUT (or INSUFFICIENT_STOCK) is true only if some instant of their request
   * had too few units, and no instant between the read and the write did: the batch is
   * written in one step, and a unit returned meanwhile (a cancel, an expiry) does not
   * take the lock. The stock the write left is an instant that does: refused when it
   * is short; otherwise (units came back, or none of the batch was written) served
   * again by the next hold, at the head of the line, their deadline unchanged.
   */
  private crowdedOut(crowded: readonly Buyer[], after: number | undefined): (() => void)[] {
    const again: Buyer[] = [];
    const answers: (() => void)[] = [];
    for (const buyer of crowded) {
      const { productId, quantity } = buyer.order;
      if (after === undefined || after >= quantity) again.push(buyer);
      else if (after <= 0) answers.push(() => buyer.reject(new SoldOutError(productId)));
      else answers.push(() => buyer.reject(new InsufficientStockError(productId, after, quantity)));
    }
    if (again.length > 0) answers.push(() => this.serveAgain(again));
    return answers;
  }

  /** Puts buyers a hold took back at the head of their product's line (the drain serving it runs). */
  private serveAgain(buyers: readonly Buyer[]): void {
    const waiting = buyers.filter((buyer) => {
      buyer.held = false;
      if (this.waitMs <= 0) return true;
      const left = buyer.deadline - performance.now();
      if (left <= 0) {
        buyer.reject(new LockTimeoutError(this.waitMs));
        return false;
      }
      buyer.timer = setTimeout(() => buyer.reject(new LockTimeoutError(this.waitMs)), left);
      return true;
    });
    if (waiting.length > 0) this.queues.get(waiting[0].order.productId)!.unshift(...waiting);
  }
}

function settle(buyer: Buyer, answer: () => void): void {
  if (buyer.settled) return;
  buyer.settled = true;
  clearTimeout(buyer.timer);
  answer();
}

function unsettled(buyers: Buyer[]): Buyer[] {
  return buyers.filter((b) => !b.settled);
}

/** The buyers that sent an Idempotency-Key, in order: those whose claim a read looks at. */
function keyedOf(buyers: readonly Buyer[]): Buyer[] {
  return buyers.filter((b) => b.order.claim);
}

/**
 * What a read taken for `asked` (at the acquisition) says of `buyers`, those of them
 * still waiting once the lock was held, in order: as readSale() of them would say it.
 */
function narrowed(read: SaleRead, asked: readonly Buyer[], buyers: readonly Buyer[]): SaleRead {
  if (buyers.length === asked.length) return read;
  const at = new Map(asked.map((b, i) => [b, i]));
  const keyedAt = new Map(keyedOf(asked).map((b, i) => [b, i]));
  return {
    sale: read.sale,
    bought: buyers.map((b) => read.bought[at.get(b)!]),
    claims: keyedOf(buyers).map((b) => read.claims[keyedAt.get(b)!]),
  };
}
