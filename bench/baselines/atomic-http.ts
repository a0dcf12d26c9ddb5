/**
 * The baseline (`npm run bench -- --baseline`): the smallest server that keeps the
 * same POST /api/orders contract, on bare `node:http` with one Lua script
 * (src/redis/scripts/purchase-7.lua) per purchase, and nothing else: no framework,
 * no validation library, no lock. Every strategy's row is compared with it, measured
 * in the same run on the same machine.
 *
 * It also answers what the bench needs to drive it: PUT /api/products/:id (admin
 * token) and GET /health. Env: PORT, HOST, REDIS_URL, KEY_PREFIX, ADMIN_TOKEN.
 */
import { Redis } from 'ioredis';
import { DEFAULT_PAYMENT_TIMEOUT_MS } from '../../src/sale/sale-limits';
import { newOrderId } from '../../src/orders/order';
import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import { KeyLayout } from '../../src/redis/key-layout';
import { purchase as purchaseScript, purchaseKeys, resetSale, resetSaleKeys } from '../../src/redis/lua-scripts';

const ID = /^[A-Za-z0-9_-]{1,64}$/;
const BODY_LIMIT = 16 * 1024;
const CONFLICT: Record<string, number> = {
  UNKNOWN_PRODUCT: 404,
  LIMIT_REACHED: 409,
  SOLD_OUT: 409,
  INSUFFICIENT_STOCK: 409,
};

const env = process.env;
const redis = new Redis(env.REDIS_URL!, { maxRetriesPerRequest: 1, commandTimeout: 2_000 });
const keys = new KeyLayout(env.KEY_PREFIX ?? 'seckill:');

function send(res: ServerResponse, status: number, body: unknown): void {
  const json = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
  res.end(json);
}

const fail = (res: ServerResponse, status: number, code: string, message: string) =>
  send(res, status, { statusCode: status, code, message });

function readJson(req: IncomingMessage): Promise<Record<string, unknown> | null> {
  return new Promise((resolve) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= BODY_LIMIT) chunks.push(c);
    });
    req.on('end', () => {
      try {
        const value = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        resolve(size <= BODY_LIMIT && value && typeof value === 'object' && !Array.isArray(value) ? value : null);
      } catch {
        resolve(null);
      }
    });
  });
}

async function purchase(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readJson(req);
  const quantity = body?.quantity ?? 1;
  if (
    !body ||
    typeof body.productId !== 'string' ||
    !ID.test(body.productId) ||
    typeof body.userId !== 'string' ||
    !ID.test(body.userId) ||
    !Number.isInteger(quantity) ||
    (quantity as number) < 1 ||
    (quantity as number) > 100
  ) {
    return fail(res, 400, 'VALIDATION_FAILED', 'productId, userId and quantity are required and must be valid');
  }
  const k = keys.product(body.productId);
  const orderId = newOrderId(body.productId);
  const [status, remaining] = await purchaseScript.run(
    redis,
    purchaseKeys(k),
    body.userId,
    quantity as number,
    orderId,
    '',
    '',
    0,
    'lock-free',
    '',
    '',
    k.marksGuess,
  );
  if (status === 'OK') {
    return send(res, 201, { orderId, productId: body.productId, userId: body.userId, quantity, remaining });
  }
  fail(res, CONFLICT[status] ?? 500, status, status.toLowerCase().replace(/_/g, ' '));
}

async function startSale(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
  if (req.headers.authorization !== `Bearer ${env.ADMIN_TOKEN}`)
    return fail(res, 401, 'UNAUTHORIZED', 'admin token required');
  const body = await readJson(req);
  const stock = body?.stock;
  const perUserLimit = body?.perUserLimit ?? 1;
  if (!ID.test(id) || !Number.isInteger(stock) || !Number.isInteger(perUserLimit)) {
    return fail(res, 400, 'VALIDATION_FAILED', 'stock and perUserLimit must be integers');
  }
  const k = keys.product(id);
  await resetSale.run(
    redis,
    resetSaleKeys(k),
    stock as number,
    perUserLimit as number,
    '1',
    'lock-free',
    '0',
    DEFAULT_PAYMENT_TIMEOUT_MS,
    '',
    '',
    '',
    '',
    '0',
    '',
    '',
    '0',
  );
  send(res, 200, { id, initialStock: stock, stock, sold: 0, orders: 0, perUserLimit });
}

const server = createServer((req, res) => {
  const url = req.url ?? '/';
  const route =
    req.method === 'POST' && url === '/api/orders'
      ? purchase(req, res)
      : req.method === 'PUT' && url.startsWith('/api/products/')
        ? startSale(req, res, url.slice('/api/products/'.length))
        : req.method === 'GET' && url === '/health'
          ? redis.ping().then(() => send(res, 200, { status: 'ok' }))
          : Promise.resolve(fail(res, 404, 'NOT_FOUND', 'no such route'));
  route.catch(() => fail(res, 503, 'REDIS_UNAVAILABLE', 'Redis is not reachable; retry later'));
});

server.listen({ port: Number(env.PORT ?? 3000), host: env.HOST ?? '127.0.0.1', backlog: 4096 });
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    server.close(() => void redis.quit().finally(() => process.exit(0)));
    server.closeIdleConnections();
  });
}
