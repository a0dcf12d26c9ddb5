/**
 * The sold-out path's yardstick (`npm run bench -- --sold-out-path`): bare Fastify 5,
 * one POST /api/orders route with the app's own route schema compiled with the app's
 * ajv settings (the same body validator, the same 409 serializer), answering every
 * valid purchase 409 SOLD_OUT without touching Redis. The app answering a sold-out product does this work plus
 * Nest's and its own, so the ratio of their CPU per request is what the app adds to a
 * framework route on that path.
 *
 * So the bench drives it as it drives the app: PUT /api/products/:id answers 200 (there
 * is no stock to set: everything is sold out) and GET /health 200. Env: PORT, HOST.
 */
import Fastify from 'fastify';
import { errorBody } from '../../src/errors/error-body';
import { SoldOutError } from '../../src/errors/errors';
import { CREATE_ORDER_ROUTE_SCHEMA, PRODUCT_ORDER_ROUTE_SCHEMA } from '../../src/orders/dto/create-order.schema';
import { STRICT_AJV } from '../../src/validation/schema-checked';

/** As src/main.ts listens: a flash sale's connections arrive at once. */
const LISTEN_BACKLOG = 4096;

const app = Fastify({ ajv: STRICT_AJV });

app.post<{ Body: { productId: string } }>('/api/orders', { schema: CREATE_ORDER_ROUTE_SCHEMA }, (request, reply) => {
  void reply.code(409).send(errorBody(new SoldOutError(request.body.productId)));
});
app.post<{ Params: { id: string } }>(
  '/api/products/:id/orders',
  { schema: PRODUCT_ORDER_ROUTE_SCHEMA },
  (request, reply) => void reply.code(409).send(errorBody(new SoldOutError(request.params.id))),
);
app.put('/api/products/:id', (_request, reply) => void reply.send({ status: 'sold out' }));
app.get('/health', (_request, reply) => void reply.send({ status: 'ok' }));

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => void app.close().then(() => process.exit(0)));
}
app
  .listen({ port: Number(process.env.PORT ?? 3000), host: process.env.HOST ?? '127.0.0.1', backlog: LISTEN_BACKLOG })
  .catch((err: Error) => {
    console.error(`fastify-route: ${err.message}`);
    process.exit(1);
  });
