/** The JSON Schema of a Product (product.ts) as the API answers it. */
export const PRODUCT_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'initialStock', 'stock', 'sold', 'orders', 'perUserLimit'],
  properties: {
    id: { type: 'string' },
    initialStock: { type: 'integer', description: 'the stock the sale started with' },
    stock: { type: 'integer', description: 'units left' },
    sold: { type: 'integer', description: 'initialStock - stock' },
    orders: { type: 'integer', description: 'orders recorded in this sale' },
    perUserLimit: { type: 'integer', description: 'units one user may buy in this sale' },
  },
} as const;
