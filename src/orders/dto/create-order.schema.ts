import { ERROR_BODY_SCHEMA } from '../../errors/error-body';
import { bodySchemaOf } from '../../validation/json-schema';
import { ORDER_STATUSES } from '../order';
import { CreateOrderDto, ProductOrderDto } from './create-order.dto';

/** The 201 body (order.ts's Order), in the order acknowledge() writes its fields. */
export const ORDER_SCHEMA = {
  type: 'object',
  required: ['orderId', 'productId', 'userId', 'quantity', 'remaining', 'status'],
  properties: {
    orderId: { type: 'string' },
    productId: { type: 'string' },
    userId: { type: 'string' },
    quantity: { type: 'integer' },
    remaining: { type: 'integer', description: 'units left right after this order (a replay: as it was then)' },
    status: {
      type: 'string',
      enum: [...ORDER_STATUSES],
      description:
        '`reserved` for an order written now (paid, cancelled or expired later: GET /api/orders/:orderId); a replay (Idempotent-Replayed: true) says what became of the order since',
    },
  },
} as const;

/**
 * POST /api/orders' Fastify route schema. Fastify compiles it once: the body schema
 * (derived from CreateOrderDto) into an ajv validator, and the two answers of the hot
 * path, 201 and 409, into serializers. A body it accepts is taken without running
 * class-validator; one it refuses goes to class-validator, which words the 400
 * (src/validation/schema-checked.ts).
 */
export const CREATE_ORDER_ROUTE_SCHEMA = {
  body: bodySchemaOf(CreateOrderDto),
  response: { 201: ORDER_SCHEMA, 409: ERROR_BODY_SCHEMA },
} as const;

/** POST /api/products/:id/orders' route schema: the same, with the product in the URL. */
export const PRODUCT_ORDER_ROUTE_SCHEMA = {
  body: bodySchemaOf(ProductOrderDto),
  response: { 201: ORDER_SCHEMA, 409: ERROR_BODY_SCHEMA },
} as const;
