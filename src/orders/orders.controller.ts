import { Body, Controller, Post } from '@nestjs/common';
import { CreateOrderDto } from './dto/create-order.dto';
import { Order } from './order';
import { OrdersService } from './orders.service';

@Controller('api/orders')
export class OrdersController {
  constructor(private readonly orders: OrdersService) {}

  /** 201 with the order; 409 SOLD_OUT / INSUFFICIENT_STOCK / LIMIT_REACHED; 503 LOCK_TIMEOUT. */
  @Post()
  create(@Body() body: CreateOrderDto): Promise<Order> {
    return this.orders.purchase(body);
  }
}
