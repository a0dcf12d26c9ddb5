import { Injectable } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { DoorRefusals } from '../door/door-refusals';
import { passShaped, WaitingRoom } from '../door/waiting-room';
import { ErrorBody, errorBody } from '../errors/error-body';
import { toAppError } from '../redis/redis-errors';
import { AdmissionInvalidError, IdempotencyKeyMismatchError, StrategyMismatchError } from '../errors/errors';
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
    let order: Order;
    // A 201 that answers again an order written before: counted apart (REPLAYED), so CREATED counts orders.
    let replayed = false;
    try {
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
      } else {
        // With a pass, the claim checks it (idempotency-claim-2.lua): one pass, one order.
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
        if (pass !== undefined) void this.room.used(line.productId, pass);
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
      }
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
    this.telemetry.answered(line.productId, replayed ? REPLAYED : CREATED);
    return order;
  }
}
