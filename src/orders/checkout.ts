import { Injectable } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { DoorRefusals } from '../door/door-refusals';
import { passShaped, WaitingRoom } from '../door/waiting-room';
import { ErrorBody, errorBody } from '../errors/error-body';
import { toAppError } from '../redis/redis-errors';
import {
  AdmissionInvalidError,
  BucketsBusyError,
  IdempotencyKeyMismatchError,
  InsufficientStockError,
  SoldOutError,
  StrategyMismatchError,
  saidOf,
  UnknownProductError,
} from '../errors/errors';
import { productOfBucket } from '../sale/buckets';
import { Escrow, Home } from './escrow';
import { CREATED, PurchaseTelemetry, REPLAYED } from '../telemetry/purchase-telemetry';
import { buyerScopedKey, Idempotency, parseIdempotencyKey } from './idempotency';
import type { Order, OrderLine } from './order';
import { PurchasePath } from './purchases/purchase-path';
import { ReplicaAcks } from './replica-acks';
import { passClaimKey } from './sale-rules';
import { StrategyMismatches } from './strategy-mismatches';

/**
 * A purchase as both purchase routes make it, from their hook (orders.controller.ts) or
 * from the route itself (OrdersController): the key or pass, the purchase path
 * LOCK_STRATEGY chose, replica acknowledgements, telemetry, and the refusals the door
 * learns.
 */
@Injectable()
export class Checkout {
  constructor(
    private readonly purchases: PurchasePath,
    private readonly idempotency: Idempotency,
    private readonly replicas: ReplicaAcks,
    private readonly telemetry: PurchaseTelemetry,
    private readonly mismatches: StrategyMismatches,
    private readonly room: WaitingRoom,
    private readonly door: DoorRefusals,
    private readonly escrow: Escrow,
  ) {}

  /**
   * 201 with the order; 409 SOLD_OUT / INSUFFICIENT_STOCK / LIMIT_REACHED /
   * SALE_NOT_STARTED / SALE_ENDED; 403 ADMISSION_*; 404 UNKNOWN_PRODUCT; 503 (see
   * errors.ts). With an Idempotency-Key: a retry gets the first answer's order again
   * (`Idempotent-Replayed: true`), 409 while the first is in flight, 422 for the key
   * with another body. With an Admission-Pass, the pass is the key (passClaimKey): it
   * is checked as the key is claimed, and consumed by the write of its order.
   * With REDIS_WAIT_REPLICAS, a 201 only once that many replicas have the order.
   */
  async buy(
    line: OrderLine,
    rawKey: string | undefined,
    pass: string | undefined,
    reply: FastifyReply,
  ): Promise<Order | ErrorBody> {
    // A malformed key is bad input, refused (400) before it counts as a purchase, as a
    // bad body is.
    // A value that cannot be a pass is refused before it is used as a key in Redis.
    if (pass !== undefined && !passShaped(pass)) throw new AdmissionInvalidError('is not a pass this sale issued');
    const key =
      pass !== undefined
        ? passClaimKey(pass)
        : rawKey === undefined
          ? undefined
          : buyerScopedKey(parseIdempotencyKey(rawKey), reply.request.buyer);
    this.telemetry.arrived(line.productId);
    let placed: Placed;
    try {
      placed = await this.inBuckets(line, (bucketLine, bucketed) =>
        // On a product of several buckets a key lives in the buyer's home bucket, so it is
        // the buyer's, as under BUYER_AUTH: the same key from another userId is another request.
        this.place(
          bucketLine,
          bucketed && pass === undefined && key !== undefined && reply.request.buyer === null
            ? buyerScopedKey(key, line.userId)
            : key,
          pass,
          reply,
          bucketed,
        ),
      );
    } catch (err) {
      // The code ErrorFilter will answer with, told once, before the answer is written.
      const known = toAppError(err);
      this.telemetry.answered(line.productId, known.code);
      if (known instanceof StrategyMismatchError) this.mismatches.saw(line.productId);
      // Redis's refusals that the URL alone will decide for a while: the door repeats them.
      if (known === err) this.door.learn(line.productId, known);
      // Most answers of a sale are refusals: answered here, the body ErrorFilter would
      // write, without a rejection unwinding through Nest's exception zone to find it.
      if (known === err && known.status === 409) {
        void reply.status(409);
        if (known.retryAfterS !== undefined) void reply.header('retry-after', String(known.retryAfterS));
        return errorBody(known);
      }
      throw err;
    }
    this.telemetry.answered(line.productId, placed.replayed ? REPLAYED : CREATED);
    return placed.order;
  }

  /**
   * A purchase in the buyer's home bucket (src/orders/escrow.ts; the product itself when
   * it has one bucket). A bucket found dry or short is refilled from the others and the
   * purchase made again; SOLD_OUT (INSUFFICIENT_STOCK) only when every bucket, and every
   * move in flight, has nothing (too little) left. The answer names the product, never a bucket.
   */
  private async inBuckets(
    line: OrderLine,
    place: (line: OrderLine, bucketed: boolean) => Promise<Placed>,
  ): Promise<Placed> {
    let home = await this.escrow.home(line.productId, line.userId);
    for (let attempt = 1; ; attempt++) {
      const since = performance.now();
      try {
        // Every purchase checks, where it decides, that its bucket is of the list it was
        // chosen from: a list read before a DELETE and a PUT (with other buckets) would buy
        // in the wrong bucket, and count the buyer's units where their next purchase does
        // not look. A restart keeps the list (listOf(), src/sale/buckets.ts).
        if (home.buckets.length === 1) return await place({ ...line, bucketList: home.list ?? undefined }, false);
        const placed = await place({ ...line, productId: home.bucketId, bucketList: home.list ?? undefined }, true);
        return { ...placed, order: { ...placed.order, productId: line.productId } };
      } catch (err) {
        if (err instanceof BucketsBusyError && err.listChanged) {
          // Read again: a new list decides afresh; the same one (its buckets half-way through
          // a DELETE and a PUT) cannot, and is answered at once.
          const now = await this.escrow.home(line.productId, line.userId, true);
          if (sameList(now, home) || attempt >= BUCKET_ATTEMPTS) throw new BucketsBusyError(attempt, 'changed');
          home = now;
          continue;
        }
        if (err instanceof UnknownProductError) {
          this.escrow.forget(line.productId);
          // A bucket of the last sale, gone with a DELETE: bought again where the new sale's
          // list says. (An id that names no product, one bucket, costs no second read.)
          const now = home.buckets.length > 1 ? await this.escrow.home(line.productId, line.userId, true) : home;
          if (!sameList(now, home) && attempt < BUCKET_ATTEMPTS) {
            home = now;
            continue;
          }
        }
        if (home.buckets.length === 1) throw err;
        if (!(err instanceof SoldOutError || err instanceof InsufficientStockError))
          throw saidOf(err, home.bucketId, line.productId);
        const left = await this.escrow.refill(home, line.quantity, since);
        if (left === 0) throw new SoldOutError(line.productId);
        if (left !== null && left < line.quantity)
          throw new InsufficientStockError(line.productId, left, line.quantity);
        // Units keep leaving before this buyer's turn (other dry buckets took them): a retry decides afresh.
        if (attempt >= BUCKET_ATTEMPTS) throw new BucketsBusyError(attempt);
      }
    }
  }

  /** The purchase itself, in one bucket: with its Idempotency-Key or pass, replica acknowledgements. */
  private async place(
    line: OrderLine,
    key: string | undefined,
    pass: string | undefined,
    reply: FastifyReply,
    bucketed: boolean,
  ): Promise<Placed> {
    let order: Order;
    // A 201 that answers again an order written before: counted apart (REPLAYED), so CREATED counts orders.
    let replayed = false;
    // REDIS_WAIT_REPLICAS: a purchase is refused before anything is written when the
    // master lacks the replicas; with a key, only once the key's lookup found no order.
    let master = '';
    const ensure = async () => {
      master = await this.replicas.ensure(line.productId);
    };
    if (key === undefined) {
      if (this.replicas.enabled) await ensure();
      order = await this.purchases.purchase(line);
      if (this.replicas.enabled) await this.replicas.confirm(line.productId, false, master);
      return { order, replayed };
    }
    // With a pass, the claim checks it (idempotency-claim-3.lua): one pass, one order.
    const checks = this.replicas.enabled ? ensure : undefined;
    const keyed = await this.idempotency.purchase(line, key, checks, pass).catch((err: unknown) => {
      // A pass that already bought, for another user or quantity.
      if (pass !== undefined && err instanceof IdempotencyKeyMismatchError) {
        throw new AdmissionInvalidError('was used for another purchase (another user or quantity)');
      }
      throw err;
    });
    // Its pass no longer holds units back: a replay's too, since the first attempt's
    // removal may have been lost with its answer (OUTCOME_UNKNOWN) or its process.
    if (pass !== undefined) void this.room.used(productOfBucket(line.productId), pass, keyed.order.quantity, bucketed);
    order = keyed.order;
    replayed = keyed.replayed;
    if (this.replicas.enabled && keyed.acknowledgedBy < this.replicas.required) {
      // A replay of an order no replica is known to have (its first answer may have
      // been OUTCOME_UNKNOWN): confirmed now, or OUTCOME_UNKNOWN again.
      if (keyed.replayed) master = await this.replicas.ensure(line.productId, true);
      await this.replicas.confirm(line.productId, true, master);
      await this.idempotency.noteAcknowledged(line.productId, key, order.orderId, this.replicas.required);
    }
    if (keyed.replayed) void reply.header('idempotent-replayed', 'true');
    return { order, replayed };
  }
}

/** Whether two reads of a product's bucket list found the same list: its name (listOf()) and its buckets. */
function sameList(a: Home, b: Home): boolean {
  return a.list === b.list && a.buckets.join(' ') === b.buckets.join(' ');
}

/** An order placed, or answered again (`replayed`: the same Idempotency-Key or pass). */
interface Placed {
  readonly order: Order;
  readonly replayed: boolean;
}

/** Purchases of one buyer in a bucketed product before BUCKETS_BUSY: each found its home refilled, and emptied again by others. */
const BUCKET_ATTEMPTS = 16;
