import { Body, Controller, Get, HttpCode, Param, Post, Req, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiSecurity, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { ApiErrors } from '../docs/api-errors';
import { DOOR_ERRORS } from '../door/door-routes';
import { PaymentGuard } from '../door/payment-signature';
import { ADMIN_AUTH, PAYMENT_AUTH } from '../docs/openapi';
import { component } from '../docs/components';
import { ApiJsonBody, ApiPathParams } from '../docs/dto-decorators';
import { OrderParamsDto } from './dto/order-params.dto';
import { ORDER_STATE_SCHEMA } from './dto/order-state.schema';
import { PayOrderDto } from './dto/pay-order.dto';
import { OrderOutcomes, OrderState } from './order-outcomes';

const ORDER_STATE = component('OrderState', ORDER_STATE_SCHEMA);

/** The door's answers on a route without a body: nothing to mismatch. */
const BUYER_DOOR_ERRORS = DOOR_ERRORS.filter((code) => code !== 'USER_MISMATCH');

/**
 * After the 201: an order is a reservation until it is paid, cancelled, or expires at
 * its sale's payment deadline (units back to stock, exactly once, in Redis).
 */
@ApiTags('orders')
@Controller('api/orders')
export class OrderOutcomesController {
  constructor(private readonly outcomes: OrderOutcomes) {}

  @Get(':orderId')
  @ApiOperation({ summary: "an order's status: reserved (with its payment deadline), paid, cancelled or expired" })
  @ApiPathParams(OrderParamsDto)
  @ApiOkResponse({ description: 'the order as Redis has it now', schema: ORDER_STATE })
  @ApiErrors(...BUYER_DOOR_ERRORS, 'VALIDATION_FAILED', 'URI_TOO_LONG', 'UNKNOWN_ORDER', 'REDIS_UNAVAILABLE')
  get(@Param() params: OrderParamsDto, @Req() request: FastifyRequest): Promise<OrderState> {
    // With BUYER_AUTH: only the order's own buyer reads it.
    return this.outcomes.get(params.orderId, request.buyer);
  }

  @Post(':orderId/pay')
  @HttpCode(200)
  @UseGuards(PaymentGuard)
  @ApiSecurity(PAYMENT_AUTH)
  @ApiBearerAuth(ADMIN_AUTH)
  @ApiOperation({
    summary: "pay a reservation (the payment provider's signed callback)",
    description:
      "marks a reserved order paid, unless its payment deadline passed first by Redis's clock (409 ORDER_EXPIRED: refund the payment) or it was cancelled (409 ORDER_CANCELLED) or paid by another payment (409 ORDER_PAID); the same paymentId again answers the paid order. Only the payment provider confirms a payment: the callback is signed (`Payment-Signature`), or sent with the admin token; anything else is 401 PAYMENT_SIGNATURE_INVALID and pays nothing",
  })
  @ApiPathParams(OrderParamsDto)
  @ApiJsonBody(PayOrderDto)
  @ApiOkResponse({ description: 'the paid order', schema: ORDER_STATE })
  @ApiErrors(
    'PAYMENT_SIGNATURE_INVALID',
    'VALIDATION_FAILED',
    'URI_TOO_LONG',
    'PAYLOAD_TOO_LARGE',
    'UNSUPPORTED_MEDIA_TYPE',
    'UNKNOWN_ORDER',
    'ORDER_PAID',
    'ORDER_CANCELLED',
    'ORDER_EXPIRED',
    'REDIS_UNAVAILABLE',
    'OUTCOME_UNKNOWN',
  )
  pay(@Param() params: OrderParamsDto, @Body() body: PayOrderDto): Promise<OrderState> {
    return this.outcomes.pay(params.orderId, body.paymentId);
  }

  @Post(':orderId/cancel')
  @HttpCode(200)
  @ApiOperation({
    summary: 'cancel a reservation: its units go back to stock',
    description:
      'a reserved order becomes cancelled and its units go back to stock, once; cancelling it again answers the same; a paid order is 409 ORDER_PAID, an expired one 409 ORDER_EXPIRED',
  })
  @ApiPathParams(OrderParamsDto)
  @ApiOkResponse({ description: 'the cancelled order', schema: ORDER_STATE })
  @ApiErrors(
    ...BUYER_DOOR_ERRORS,
    'VALIDATION_FAILED',
    'URI_TOO_LONG',
    'UNKNOWN_ORDER',
    'ORDER_PAID',
    'ORDER_EXPIRED',
    'REDIS_UNAVAILABLE',
    'OUTCOME_UNKNOWN',
  )
  cancel(@Param() params: OrderParamsDto, @Req() request: FastifyRequest): Promise<OrderState> {
    // With BUYER_AUTH: only the order's own buyer cancels it.
    return this.outcomes.cancel(params.orderId, request.buyer);
  }
}
