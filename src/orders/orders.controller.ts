import { Body, Controller, Headers, Post, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { CreateOrderDto } from './dto/create-order.dto';
import { Idempotency, parseIdempotencyKey } from './idempotency';
import type { Order, OrderLine } from './order';
import { PurchasePath } from './purchases/purchase-path';

@Controller('api/orders')
export class OrdersController {
  constructor(
    private readonly purchases: PurchasePath,
    private readonly idempotency: Idempotency,
  ) {}

  /**
   * 201 with the order; 409 SOLD_OUT / INSUFFICIENT_STOCK / LIMIT_REACHED; 404
   * UNKNOWN_PRODUCT; 503 (see errors.ts). With an Idempotency-Key: a retry gets the
   * first answer's order again (`Idempotent-Replayed: true`), 409 while the first is
   * in flight, 422 for the key with another body.
   */
  @Post()
  async create(
    @Body() body: CreateOrderDto,
    @Headers('idempotency-key') rawKey: string | undefined,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Order> {
    const line: OrderLine = { productId: body.productId, userId: body.userId, quantity: body.quantity };
    if (rawKey === undefined) return this.purchases.purchase(line);
    const { order, replayed } = await this.idempotency.purchase(line, parseIdempotencyKey(rawKey));
    if (replayed) void reply.header('idempotent-replayed', 'true');
    return order;
  }
}
