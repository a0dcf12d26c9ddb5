import { LOCK_STRATEGY_NAMES } from '../settings/strategy.config';

/** The JSON Schema of GET /api/live's body (live.controller.ts products(), live-sales.ts recent()). */
export const LIVE_PRODUCTS_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['instance', 'strategy', 'telemetry', 'products'],
  properties: {
    instance: { type: 'string', description: 'this app instance, `<hostname>/<pid>`' },
    strategy: { type: 'string', enum: [...LOCK_STRATEGY_NAMES] },
    telemetry: { type: 'boolean', description: 'TELEMETRY: off, the instance counts nothing and `products` is empty' },
    products: {
      type: 'array',
      description: 'the products this instance saw lately (bought or reset), the latest first',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['productId', 'seenMsAgo'],
        properties: {
          productId: { type: 'string' },
          seenMsAgo: { type: 'integer', description: 'ms since its last buyer or reset here' },
        },
      },
    },
  },
} as const;
