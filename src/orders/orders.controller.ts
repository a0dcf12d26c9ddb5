import { Body, Controller, Headers, Post, Res } from '@nestjs/common';
import { RouteSchema } from '@nestjs/platform-fastify';
import { ApiCreatedResponse, ApiHeader, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { ApiErrors } from '../docs/api-errors';
import { DOOR_ERRORS } from '../door/door-routes';
import { component } from '../docs/components';
import { ApiJsonBody } from '../docs/dto-decorators';
import { ErrorBody, errorBody, toAppError } from '../errors/error.filter';
import { CREATED, PurchaseTelemetry } from '../telemetry/purchase-telemetry';
import { CreateOrderDto } from './dto/create-order.dto';
import { CREATE_ORDER_ROUTE_SCHEMA, ORDER_SCHEMA } from './dto/create-order.schema';
import { Idempotency, parseIdempotencyKey } from './idempotency';
import type { Order, OrderLine } from './order';
import { PurchasePath } from './purchases/purchase-path';
import { ReplicaAcks } from './replica-acks';
import { StrategyMismatches } from './strategy-mismatches';
import { StrategyMismatchError } from '../errors/errors';

@ApiTags('orders')
@Controller('api/orders')
export class OrdersController {
  constructor(
    private readonly purchases: PurchasePath,
    private readonly idempotency: Idempotency,
    private readonly replicas: ReplicaAcks,
    private readonly telemetry: PurchaseTelemetry,
    private readonly mismatches: StrategyMismatches,
  ) {}

  /**
   * 201 with the order; 409 SOLD_OUT / INSUFFICIENT_STOCK / LIMIT_REACHED; 404
   * UNKNOWN_PRODUCT; 503 (see errors.ts). With an Idempotency-Key: a retry gets the
   * first answer's order again (`Idempotent-Replayed: true`), 409 while the first is
   * in flight, 422 for the key with another body. With REDIS_WAIT_REPLICAS, a 201 only
   * once that many replicas have the order (ReplicaAcks).
   */
  @Post()
  @RouteSchema(CREATE_ORDER_ROUTE_SCHEMA)
  @ApiOperation({
    summary: 'buy: one order of quantity units of a product for a user',
    description:
      'The door answers first, before the body is read: over RATE_LIMIT_PER_IP or RATE_LIMIT_PER_USER, 429 ' +
      '`RATE_LIMITED` (with `Retry-After`, `RateLimit-Policy`, `RateLimit`). With BUYER_AUTH set, the request ' +
      'needs `Authorization: Bearer <JWT>` from the configured issuer, and `userId` must be its `sub` ' +
      '(401 `BUYER_TOKEN_REQUIRED`, `BUYER_TOKEN_INVALID`, `BUYER_TOKEN_EXPIRED`; 403 `USER_MISMATCH`).',
  })
  @ApiJsonBody(CreateOrderDto)
  @ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    description:
      'makes a retry safe: 1 to 255 visible ASCII characters other than `"` and `\\`, bare or quoted; scoped to the product',
    schema: { type: 'string' },
  })
  @ApiCreatedResponse({
    description: 'the order; a retry with the same Idempotency-Key and body answers the same order again',
    schema: component('Order', ORDER_SCHEMA),
    headers: {
      'Idempotent-Replayed': {
        description: "`true` when this answer is a retry's: the order was placed earlier, nothing was written now",
        schema: { type: 'string', enum: ['true'] },
      },
    },
  })
  @ApiErrors(
    ...DOOR_ERRORS,
    'VALIDATION_FAILED',
    'PAYLOAD_TOO_LARGE',
    'UNSUPPORTED_MEDIA_TYPE',
    'UNKNOWN_PRODUCT',
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
  )
  async create(
    @Body() body: CreateOrderDto,
    @Headers('idempotency-key') rawKey: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Order | ErrorBody> {
    const line: OrderLine = { productId: body.productId, userId: body.userId, quantity: body.quantity };
    // A malformed key is bad input, refused (400) before it counts as a purchase, as a
    // bad body is.
    const key = rawKey === undefined ? undefined : parseIdempotencyKey(rawKey);
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
        const keyed = await this.idempotency.purchase(line, key, this.replicas.enabled ? ensure : undefined);
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
      // Most answers of a sale are refusals: answered here, the body ErrorFilter would
      // write, without a rejection unwinding through Nest's exception zone to find it.
      if (known === err && known.status === 409) {
        void reply.status(409);
        return errorBody(known);
      }
      throw err;
    }
    this.telemetry.answered(line.productId, CREATED);
    return order;
  }
}
