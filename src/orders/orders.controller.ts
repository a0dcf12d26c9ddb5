import { Body, Controller, Headers, Param, Post, Res } from '@nestjs/common';
import { RouteSchema } from '@nestjs/platform-fastify';
import { ApiCreatedResponse, ApiHeader, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ApiErrors } from '../docs/api-errors';
import { DOOR_ERRORS } from '../door/door-routes';
import { component } from '../docs/components';
import { ApiJsonBody, ApiPathParams } from '../docs/dto-decorators';
import { DoorRefusals } from '../door/door-refusals';
import { passShaped, WaitingRoom } from '../door/waiting-room';
import { ProductParamsDto } from '../products/dto/product-params.dto';
import { ErrorBody, errorBody, toAppError } from '../errors/error.filter';
import { CREATED, PurchaseTelemetry } from '../telemetry/purchase-telemetry';
import { CreateOrderDto, ProductOrderDto } from './dto/create-order.dto';
import { CREATE_ORDER_ROUTE_SCHEMA, ORDER_SCHEMA, PRODUCT_ORDER_ROUTE_SCHEMA } from './dto/create-order.schema';
import { passClaimKey } from './sale-rules';
import { buyerScopedKey, Idempotency, parseIdempotencyKey } from './idempotency';
import type { Order, OrderLine } from './order';
import { PurchasePath } from './purchases/purchase-path';
import { ReplicaAcks } from './replica-acks';
import { StrategyMismatches } from './strategy-mismatches';
import { AdmissionInvalidError, IdempotencyKeyMismatchError, StrategyMismatchError } from '../errors/errors';

/** What both purchase routes answer, besides the order: the door's refusals first. */
const PURCHASE_ERRORS = [
  ...DOOR_ERRORS,
  'VALIDATION_FAILED',
  'PAYLOAD_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
  'UNKNOWN_PRODUCT',
  'SALE_NOT_STARTED',
  'SALE_ENDED',
  'ADMISSION_REQUIRED',
  'ADMISSION_INVALID',
  'SOLD_OUT',
  'INSUFFICIENT_STOCK',
  'LIMIT_REACHED',
  'IDEMPOTENCY_KEY_IN_USE',
  'IDEMPOTENCY_KEY_MISMATCH',
  'LOCK_TIMEOUT',
  'LOCK_EXPIRED',
  'STALE_LOCK',
  'LOCK_BYPASSED',
  'CONTENTION',
  'LOCK_NODES_UNAVAILABLE',
  'STRATEGY_MISMATCH',
  'REDIS_UNAVAILABLE',
  'REDIS_OUT_OF_MEMORY',
  'REDIS_PERSISTENCE_FAILED',
  'REDIS_NOT_ENOUGH_REPLICAS',
  'REDIS_READ_ONLY',
  'REDIS_NO_PERMISSION',
  'OUTCOME_UNKNOWN',
];

/** What the door (src/door) answers before the route, on both purchase routes. */
const DOOR_FIRST =
  'The door answers first, before the body is read: over RATE_LIMIT_PER_IP or RATE_LIMIT_PER_USER, 429 ' +
  '`RATE_LIMITED` (with `Retry-After`, `RateLimit-Policy`, `RateLimit`). With BUYER_AUTH set, the request ' +
  'needs `Authorization: Bearer <JWT>` from the configured issuer, and `userId` must be its `sub` ' +
  '(401 `BUYER_TOKEN_REQUIRED`, `BUYER_TOKEN_INVALID`, `BUYER_TOKEN_EXPIRED`; 403 `USER_MISMATCH`).';

const IDEMPOTENCY_KEY_HEADER = ApiHeader({
  name: 'Idempotency-Key',
  required: false,
  description:
    'makes a retry safe: 1 to 255 visible ASCII characters other than `"` and `\\`, bare or quoted; scoped to the product. With an Admission-Pass the pass is the key, and this header is not used',
  schema: { type: 'string' },
});

const ADMISSION_PASS_HEADER = ApiHeader({
  name: 'Admission-Pass',
  required: false,
  description:
    'required for a product with a waiting room: the pass its queue gave this user (GET /api/products/:id/queue/:ticket). It buys once: a retry with it is answered the same order (`Idempotent-Replayed: true`)',
  schema: { type: 'string' },
});

const CREATED_ORDER = ApiCreatedResponse({
  description:
    'the order; a retry with the same Idempotency-Key (or Admission-Pass) and body answers the same order again',
  schema: component('Order', ORDER_SCHEMA),
  headers: {
    'Idempotent-Replayed': {
      description: "`true` when this answer is a retry's: the order was placed earlier, nothing was written now",
      schema: { type: 'string', enum: ['true'] },
    },
  },
});

@ApiTags('orders')
@Controller('api')
export class OrdersController {
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
   * 201 with the order; 409 SOLD_OUT / INSUFFICIENT_STOCK / LIMIT_REACHED; 404
   * UNKNOWN_PRODUCT; 503 (see errors.ts). With an Idempotency-Key: a retry gets the
   * first answer's order again (`Idempotent-Replayed: true`), 409 while the first is
   * in flight, 422 for the key with another body. With REDIS_WAIT_REPLICAS, a 201 only
   * once that many replicas have the order (ReplicaAcks).
   */
  @Post('orders')
  @RouteSchema(CREATE_ORDER_ROUTE_SCHEMA)
  @ApiOperation({ summary: 'buy: one order of quantity units of a product for a user', description: DOOR_FIRST })
  @ApiJsonBody(CreateOrderDto)
  @IDEMPOTENCY_KEY_HEADER
  @ADMISSION_PASS_HEADER
  @CREATED_ORDER
  @ApiErrors(...PURCHASE_ERRORS)
  create(
    @Body() body: CreateOrderDto,
    @Headers('idempotency-key') rawKey: string | undefined,
    @Headers('admission-pass') pass: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Order | ErrorBody> {
    return this.buy({ productId: body.productId, userId: body.userId, quantity: body.quantity }, rawKey, pass, reply);
  }

  /**
   * The same purchase with the product in the URL: a refusal that the URL alone decides
   * (sold out, not started, ended) is answered at the door, before the body is read
   * (src/door/door-refusals.ts).
   */
  @Post('products/:id/orders')
  @RouteSchema(PRODUCT_ORDER_ROUTE_SCHEMA)
  @ApiOperation({
    summary: 'buy, the product in the URL: refusals the URL decides cost almost nothing',
    description:
      'A refusal Redis gave this product in the last 250 ms that the URL alone decides (`SOLD_OUT`, ' +
      '`SALE_NOT_STARTED` more than 250 ms before the start, `SALE_ENDED`) is answered before anything else, ' +
      'for a JSON body within the limit and without Idempotency-Key or Admission-Pass. ' +
      DOOR_FIRST,
  })
  @ApiPathParams(ProductParamsDto)
  @ApiJsonBody(ProductOrderDto)
  @IDEMPOTENCY_KEY_HEADER
  @ADMISSION_PASS_HEADER
  @CREATED_ORDER
  @ApiErrors('URI_TOO_LONG', ...PURCHASE_ERRORS)
  createForProduct(
    @Param() params: ProductParamsDto,
    @Body() body: ProductOrderDto,
    @Headers('idempotency-key') rawKey: string | undefined,
    @Headers('admission-pass') pass: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Order | ErrorBody> {
    return this.buy({ productId: params.id, userId: body.userId, quantity: body.quantity }, rawKey, pass, reply);
  }

  /**
   * 201 with the order; 409 SOLD_OUT / INSUFFICIENT_STOCK / LIMIT_REACHED /
   * SALE_NOT_STARTED / SALE_ENDED; 403 ADMISSION_*; 404 UNKNOWN_PRODUCT; 503 (see
   * errors.ts). With an Idempotency-Key: a retry gets the first answer's order again
   * (`Idempotent-Replayed: true`), 409 while the first is in flight, 422 for the key
   * with another body. With an Admission-Pass, the pass is the key (passClaimKey): it
   * is checked as the key is claimed, and consumed by the write of its order.
   * With REDIS_WAIT_REPLICAS, a 201 only once that many replicas have the order.
   */
  private async buy(
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
    this.telemetry.answered(line.productId, CREATED);
    return order;
  }
}
