import { Body, Controller, Post } from '@nestjs/common';
import { CreateOrderDto } from './dto/create-order.dto';
import type { Order } from './order';
import { PurchasePath } from './purchases/purchase-path';

@Controller('api/orders')
export class OrdersController {
  constructor(private readonly purchases: PurchasePath) {}

  /** 201 with the order; 409 SOLD_OUT / INSUFFICIENT_STOCK / LIMIT_REACHED; 404 UNKNOWN_PRODUCT; 503 (see errors.ts). */
  @Post()
  create(@Body() body: CreateOrderDto): Promise<Order> {
    return this.purchases.purchase(body);
  }
}
