import { Body, Controller, Headers, Post, Res } from '@nestjs/common';
import { RouteSchema } from '@nestjs/platform-fastify';
import type { FastifyReply } from 'fastify';
import { ErrorBody, errorBody } from '../errors/error.filter';
import { AppError } from '../errors/errors';
import { CreateOrderDto } from './dto/create-order.dto';
import { CREATE_ORDER_ROUTE_SCHEMA } from './dto/create-order.schema';
import { Idempotency, parseIdempotencyKey } from './idempotency';
import type { Order, OrderLine } from './order';
import { PurchasePath } from './purchases/purchase-path';
import { ReplicaAcks } from './replica-acks';
import { PurchaseTelemetry } from '../telemetry/purchase-telemetry';

@Controller('api/orders')
export class OrdersController {
  constructor(
    private readonly purchases: PurchasePath,
    private readonly idempotency: Idempotency,
    private readonly replicas: ReplicaAcks,
    private readonly telemetry: PurchaseTelemetry,
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
  async create(
    @Body() body: CreateOrderDto,
    @Headers('idempotency-key') rawKey: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Order | ErrorBody> {
    const line: OrderLine = { productId: body.productId, userId: body.userId, quantity: body.quantity };
    this.telemetry.arrived(line.productId);
    let code = 'INTERNAL_ERROR';
    try {
      // REDIS_WAIT_REPLICAS: refused before anything is written when the master lacks the replicas.
      const master = this.replicas.enabled ? await this.replicas.ensure(line.productId) : '';
      if (rawKey === undefined) {
        const order = await this.purchases.purchase(line);
        if (this.replicas.enabled) await this.replicas.confirm(line.productId, false, master);
        code = 'CREATED';
        return order;
      }
      const { order, replayed } = await this.idempotency.purchase(line, parseIdempotencyKey(rawKey));
      if (this.replicas.enabled) await this.replicas.confirm(line.productId, true, master);
      if (replayed) void reply.header('idempotent-replayed', 'true');
      code = 'CREATED';
      return order;
    } catch (err) {
      if (err instanceof AppError) code = err.code;
      // Most answers of a sale are refusals: answered here, the body ErrorFilter would
      // write, without a rejection unwinding through Nest's exception zone to find it.
      if (err instanceof AppError && err.status === 409) {
        void reply.status(409);
        return errorBody(err);
      }
      throw err;
    } finally {
      this.telemetry.answered(line.productId, code);
    }
  }
}
