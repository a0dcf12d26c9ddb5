-- The system of record for orders: one row per order, in the status Redis gave it.
-- Rows are written only by the settler, from the products' order streams, each write
-- idempotent by order_id (orders) and by (product_id, stream_id) (order_events).
CREATE TABLE orders (
  order_id    text        PRIMARY KEY,
  product_id  text        NOT NULL,
  user_id     text        NOT NULL,
  quantity    integer     NOT NULL CHECK (quantity > 0),
  status      text        NOT NULL CHECK (status IN ('reserved', 'paid', 'cancelled', 'expired')),
  payment_id  text,
  -- Redis's clock: the time of the order's entry in its stream.
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL
);
CREATE INDEX orders_product_status ON orders (product_id, status);

-- Every stream entry settled, once: what happened to which order, and when (Redis's clock).
CREATE TABLE order_events (
  product_id  text        NOT NULL,
  stream_id   text        NOT NULL,
  order_id    text        NOT NULL,
  event       text        NOT NULL CHECK (event IN ('created', 'paid', 'cancelled', 'expired')),
  at          timestamptz NOT NULL,
  -- The order id too: a stream deleted by a sale's restart starts its ids again from the
  -- clock, and a new entry may reuse an old one's id (the same millisecond, a promoted
  -- replica's clock behind); the same entry written twice still collides.
  PRIMARY KEY (product_id, stream_id, order_id)
);
CREATE INDEX order_events_order ON order_events (order_id);
