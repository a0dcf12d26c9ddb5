import { ORDER_STATUSES } from '../orders/order';

/** The JSON Schema of a Product (product.ts) as the API answers it. */
export const PRODUCT_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: [
    'id',
    'initialStock',
    'stock',
    'sold',
    'orders',
    'perUserLimit',
    'paymentTimeoutMs',
    'startsAt',
    'endsAt',
    'queue',
    'buckets',
    'serverTime',
  ],
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
    startsAt: {
      type: 'string',
      nullable: true,
      description: "when the sale opens, by Redis's clock (null: open since its start)",
    },
    endsAt: {
      type: 'string',
      nullable: true,
      description: "when the sale closes, by Redis's clock (null: never)",
    },
    queue: {
      type: 'object',
      nullable: true,
      additionalProperties: false,
      required: ['admitPerSecond', 'passTtlMs'],
      description: 'the waiting room in front of the sale (null: none, buyers buy directly)',
      properties: {
        admitPerSecond: { type: 'integer', description: 'buyers admitted per second' },
        passTtlMs: { type: 'integer', description: 'how long an unused pass stays valid' },
      },
    },
    buckets: {
      type: 'integer',
      description:
        'escrow buckets the stock is kept in, each on its own hash tag (on a cluster, on distinct masters where there are enough): 1 for a product sold from one shard; stock and sold are their sums, units moving between them counted in stock (GET /api/products/:id/buckets, admin, shows each)',
    },
    serverTime: {
      type: 'string',
      description: "Redis's clock now: compare it with startsAt for a countdown that ignores the client's own clock",
    },
  },
} as const;

/** The JSON Schema of a ProductBucket (product.ts). */
export const PRODUCT_BUCKET_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'slot', 'initialStock', 'stock', 'orders', 'inFlight'],
  properties: {
    id: {
      type: 'string',
      description: "the product's id for bucket 0, `<id>~<n>` for the others (its keys' hash tag is `{p:<bucket id>}`)",
    },
    slot: { type: 'integer', description: 'the Redis Cluster slot of its keys (CLUSTER KEYSLOT)' },
    initialStock: { type: 'integer', description: "its share of the sale's stock at the start" },
    stock: { type: 'integer', description: 'units it holds the rights to now' },
    orders: { type: 'integer', description: "orders it sold (its buyers' home bucket)" },
    inFlight: { type: 'integer', description: 'units it gave up to another bucket that have not landed there yet' },
  },
} as const;

/** The JSON Schema of a ClosedSale (product.ts). */
export const CLOSED_SALE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['product', 'cancelled', 'unsettled'],
  properties: {
    product: PRODUCT_SCHEMA,
    cancelled: {
      type: 'integer',
      description: 'reservations this close cancelled, their units back in stock once (paid orders stay paid)',
    },
    unsettled: {
      type: 'integer',
      nullable: true,
      description:
        'with settlement on: order events of the product not yet in PostgreSQL when the close stopped waiting (0: a PUT with discardOrders may restart the sale now); null where this instance does not settle and no settler elsewhere marked the prefix',
    },
  },
} as const;

/** The JSON Schema of a DeletedProduct (product.ts). */
export const DELETED_PRODUCT_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'keys', 'discardedOrders'],
  properties: {
    id: { type: 'string' },
    keys: {
      type: 'integer',
      description:
        "the product's Redis keys deleted (its fencing counter stays, so that a paused holder's old token never passes a later sale's check)",
    },
    discardedOrders: {
      type: 'integer',
      description:
        'orders deleted that PostgreSQL never had: only with `discardOrders=true`, where orders are not settled; else 0 (every order stays in PostgreSQL)',
    },
  },
} as const;

/** The JSON Schema of a SettledOrder (product.ts). */
export const SETTLED_ORDER_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['orderId', 'userId', 'quantity', 'status', 'paymentId', 'createdAt', 'updatedAt'],
  properties: {
    orderId: { type: 'string' },
    userId: { type: 'string' },
    quantity: { type: 'integer' },
    status: { type: 'string', enum: [...ORDER_STATUSES] },
    paymentId: { type: 'string', nullable: true, description: 'the payment that paid it (null: not paid)' },
    createdAt: { type: 'string', description: "when it was placed, by Redis's clock" },
    updatedAt: { type: 'string', description: "its last change of status, by Redis's clock" },
  },
} as const;

/** A page of anything: its items and the cursor of the next page (null: this was the last). */
export function pageSchema<Item>(item: Item, cursor: string) {
  return {
    type: 'object',
    additionalProperties: false,
    required: ['items', 'cursor'],
    properties: {
      items: { type: 'array', items: item },
      cursor: { type: 'string', nullable: true, description: cursor },
    },
  } as const;
}
