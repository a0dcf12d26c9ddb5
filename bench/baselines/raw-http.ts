/**
 * The door's yardstick (`npm run bench -- --sold-out-path`): bare `node:http`, answering
 * every POST /api/products/:id/orders with the app's own 409 SOLD_OUT body (the bytes
 * errorBody() makes), from the URL alone, without reading the body: the least any
 * server can do to refuse a sold-out product over HTTP. The app's door
 * (src/door/door-refusals.ts) does this plus what the app is (its other routes, its
 * telemetry), so the ratio of their CPU per request is what the app costs on its
 * cheapest path.
 *
 * So the bench drives it as it drives the app: PUT /api/products/:id answers 200 (there
 * is no stock to set: everything is sold out) and GET /health 200. Env: PORT, HOST.
 */
import { createServer } from 'node:http';
import { errorBody } from '../../src/errors/error-body';
import { SoldOutError } from '../../src/errors/errors';

/** As src/main.ts listens: a flash sale's connections arrive at once. */
const LISTEN_BACKLOG = 4096;
/** As the app's server keeps idle connections (Fastify's default). */
const KEEP_ALIVE_MS = 72_000;
const PRODUCT_ORDERS = /^\/api\/products\/([A-Za-z0-9_-]{1,64})\/orders$/;
const JSON_TYPE = 'application/json; charset=utf-8';

const bodies = new Map<string, Buffer>();
const ok = Buffer.from(JSON.stringify({ status: 'ok' }));

const server = createServer((req, res) => {
  const match = req.method === 'POST' ? PRODUCT_ORDERS.exec(req.url!) : null;
  if (match) {
    let body = bodies.get(match[1]);
    if (!body) bodies.set(match[1], (body = Buffer.from(JSON.stringify(errorBody(new SoldOutError(match[1]))))));
    res.writeHead(409, { 'content-type': JSON_TYPE, 'content-length': body.length });
    res.end(body);
    return;
  }
  // PUT /api/products/:id, GET /health: drain the body, answer 200.
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': ok.length });
    res.end(ok);
  });
});
server.keepAliveTimeout = KEEP_ALIVE_MS;

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => server.close(() => process.exit(0)));
}
server.on('error', (err) => {
  console.error(`raw-http: ${err.message}`);
  process.exit(1);
});
server.listen({
  port: Number(process.env.PORT ?? 3000),
  host: process.env.HOST ?? '127.0.0.1',
  backlog: LISTEN_BACKLOG,
});
