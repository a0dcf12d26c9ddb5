import { ORDER_STATUSES } from '../order';

/** An order's state (order-outcomes.ts's OrderState) as GET, pay and cancel answer it. */
export const ORDER_STATE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['orderId', 'productId', 'userId', 'quantity', 'status', 'paymentId', 'payBy'],
  properties: {
    orderId: { type: 'string' },
    productId: { type: 'string' },
    userId: { type: 'string' },
    quantity: { type: 'integer' },
    status: { type: 'string', enum: [...ORDER_STATUSES] },
    paymentId: { type: 'string', nullable: true, description: 'the payment that paid it; null unless paid' },
    payBy: {
      type: 'string',
      nullable: true,
      description: "while reserved, when it expires unless paid: ISO 8601 (UTC), Redis's clock; else null",
    },
  },
} as const;
