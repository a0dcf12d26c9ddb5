/** The JSON Schema of a Product (product.ts) as the API answers it. */
export const PRODUCT_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'initialStock', 'stock', 'sold', 'orders', 'perUserLimit', 'paymentTimeoutMs'],
  properties: {
    id: { type: 'string' },
    initialStock: { type: 'integer', description: 'the stock the sale started with' },
    stock: { type: 'integer', description: 'units left' },
    sold: {
      type: 'integer',
      description: 'initialStock - stock: units reserved or paid (cancelled and expired ones are back in stock)',
    },
    orders: { type: 'integer', description: 'orders placed in this sale, whatever became of them since' },
    perUserLimit: { type: 'integer', description: 'units one user may buy in this sale' },
    paymentTimeoutMs: {
      type: 'integer',
      nullable: true,
      description: 'how long an order stays reserved waiting for its payment (null: a sale started before deadlines)',
    },
  },
} as const;
