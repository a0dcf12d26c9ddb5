-- An admin pages through a product's orders by order id (GET /api/products/:id/orders,
-- keyset: order_id > the last one seen): this index answers each page with a range
-- read of that product's rows, never a sort of all of them.
CREATE INDEX orders_product_order ON orders (product_id, order_id);
