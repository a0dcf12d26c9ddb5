import { Redis } from 'ioredis';
import { connect } from 'node:net';
import { DoorRefusals } from '../src/door/door-refusals';
import { KeyLayout } from '../src/redis/key-layout';
import { PAYMENT_SECRET, startSale, startTestApp } from './helpers/app';
import { PAYMENT_SIGNATURE_TOLERANCE_S, signPayment } from '../src/door/payment-signature';
import { OpenApiDocument } from './helpers/openapi';
import { uniquePrefix } from './helpers/redis';
import { startTestStack, TestStack } from './helpers/stack';

/**
 * Every status and code of the HTTP contract, against a real app and a real Redis;
 * every answer also held against the app's OpenAPI document (its status declared,
 * its body valid against that response's schema).
 */
describe('HTTP API', () => {
  let stack: TestStack;
  let t: { url: string };
  let client: Redis;
  let keys: KeyLayout;
  let openapi: OpenApiDocument;

  beforeAll(async () => {
    stack = await startTestStack('api');
    ({ client, keys } = stack);
    t = stack;
    openapi = await OpenApiDocument.servedBy(stack.url);
  });

  const request = (...args: Parameters<OpenApiDocument['request']>) => openapi.request(...args);

  afterAll(() => stack?.close());

  const buy = (productId: string, userId: string, quantity?: number) =>
    request(t.url, 'POST', '/api/orders', { json: { productId, userId, quantity } });

  /** Everything a purchase could change, to prove a refused request changed nothing. */
  async function snapshot(productId: string) {
    const k = keys.product(productId);
    const [stock, buyers, orders] = await Promise.all([
      client.get(k.stock),
      client.hgetall(k.buyers),
      client.xlen(k.orders),
    ]);
    return { stock, buyers, orders };
  }

  describe('PUT /api/products/:id (admin)', () => {
    it('starts a sale and returns the product', async () => {
      const res = await request(t.url, 'PUT', '/api/products/widget', {
        json: { stock: 5, perUserLimit: 2 },
        admin: true,
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        id: 'widget',
        initialStock: 5,
        stock: 5,
        sold: 0,
        orders: 0,
        perUserLimit: 2,
        paymentTimeoutMs: 900_000,
        startsAt: null,
        endsAt: null,
        queue: null,
        buckets: 1,
        serverTime: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
      });
    });

    it('defaults perUserLimit to 1', async () => {
      const res = await request(t.url, 'PUT', '/api/products/plain', { json: { stock: 3 }, admin: true });
      expect(res.body).toMatchObject({ initialStock: 3, perUserLimit: 1 });
    });

    it('restarting a sale clears buyers, orders, Idempotency-Key outcomes and the lock', async () => {
      await startSale(t.url, 'restart', 2);
      expect((await buy('restart', 'alice')).status).toBe(201);
      const keyed = () =>
        request(t.url, 'POST', '/api/orders', {
          json: { productId: 'restart', userId: 'keyed' },
          headers: { 'idempotency-key': 'k-restart' },
        });
      const before = await keyed();
      const k = keys.product('restart');
      expect(await client.hexists(k.idem, 'k-restart')).toBe(1);
      const res = await request(t.url, 'PUT', '/api/products/restart', {
        json: { stock: 4, discardOrders: true },
        admin: true,
      });
      expect(res.body).toEqual({
        id: 'restart',
        initialStock: 4,
        stock: 4,
        sold: 0,
        orders: 0,
        perUserLimit: 1,
        paymentTimeoutMs: 900_000,
        startsAt: null,
        endsAt: null,
        queue: null,
        buckets: 1,
        serverTime: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
      });
      expect(await client.exists(k.buyers, k.orders, k.lock, k.idem)).toBe(0);
      expect((await buy('restart', 'alice')).status).toBe(201);
      // The key belongs to the last sale: in this one it is a new purchase.
      const after = await keyed();
      expect(after.status).toBe(201);
      expect(after.body.orderId).not.toBe(before.body.orderId);
    });

    it('refuses to discard the orders of a sale under way without "discardOrders": 409 SALE_HAS_ORDERS, nothing changed', async () => {
      await startSale(t.url, 'under-way', 3);
      expect((await buy('under-way', 'alice')).status).toBe(201);
      const before = await snapshot('under-way');
      for (const json of [{ stock: 100 }, { stock: 100, discardOrders: false }]) {
        const res = await request(t.url, 'PUT', '/api/products/under-way', { json, admin: true });
        expect(res.status).toBe(409);
        expect(res.body).toEqual({
          statusCode: 409,
          code: 'SALE_HAS_ORDERS',
          message:
            'product "under-way" has 1 order in its current sale, which a new sale discards; send the PUT again with "discardOrders": true to do so',
        });
        expect(await snapshot('under-way')).toEqual(before);
        expect(await client.hget(keys.product('under-way').meta, 'initialStock')).toBe('3');
      }
      // A sale with no orders yet restarts without it; "discardOrders" must be a boolean.
      await startSale(t.url, 'no-orders-yet', 3);
      const fresh = await request(t.url, 'PUT', '/api/products/no-orders-yet', { json: { stock: 9 }, admin: true });
      expect(fresh.status).toBe(200);
      const typo = await request(t.url, 'PUT', '/api/products/under-way', {
        json: { stock: 100, discardOrders: 'yes' },
        admin: true,
      });
      expect(typo.status).toBe(400);
      expect(typo.body.code).toBe('VALIDATION_FAILED');
      const discarded = await request(t.url, 'PUT', '/api/products/under-way', {
        json: { stock: 100, discardOrders: true },
        admin: true,
      });
      expect(discarded.status).toBe(200);
      expect(discarded.body).toMatchObject({ initialStock: 100, stock: 100, orders: 0 });
    });

    it.each([
      ['no Authorization header', {}],
      ['a wrong token', { authorization: 'Bearer not-the-admin-token-at-all' }],
      ['the token without Bearer', { authorization: 'seckill-test-token-5b3e9a1c7f2d' }],
      ['an empty bearer', { authorization: 'Bearer ' }],
    ])('refuses %s with 401 UNAUTHORIZED and changes nothing', async (_case, headers) => {
      await startSale(t.url, 'guarded', 7);
      const res = await request(t.url, 'PUT', '/api/products/guarded', { json: { stock: 1000 }, headers });
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ statusCode: 401, code: 'UNAUTHORIZED' });
      expect((await snapshot('guarded')).stock).toBe('7');
    });

    it.each([
      ['a negative stock', { stock: -1 }],
      ['a stock over 10,000,000', { stock: 10_000_001 }],
      ['a float stock', { stock: 1.5 }],
      ['a string stock', { stock: '5' }],
      ['a missing stock', { perUserLimit: 1 }],
      ['perUserLimit 0', { stock: 5, perUserLimit: 0 }],
      ['perUserLimit 101', { stock: 5, perUserLimit: 101 }],
      ['perUserLimit null', { stock: 5, perUserLimit: null }],
      ['an unknown field', { stock: 5, price: 10 }],
    ])('refuses %s with 400 VALIDATION_FAILED', async (_case, json) => {
      const res = await request(t.url, 'PUT', '/api/products/bad-body', { json, admin: true });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ statusCode: 400, code: 'VALIDATION_FAILED' });
      expect(Array.isArray(res.body.errors)).toBe(true);
      expect(await client.exists(keys.product('bad-body').meta)).toBe(0);
    });

    it('refuses a bad product id with 400', async () => {
      const res = await request(t.url, 'PUT', `/api/products/${'x'.repeat(65)}`, { json: { stock: 1 }, admin: true });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('VALIDATION_FAILED');
    });
  });

  describe('GET /api/products/:id', () => {
    it('shows stock, sold and orders', async () => {
      await startSale(t.url, 'shown', 10, 3);
      await buy('shown', 'u1', 3);
      await buy('shown', 'u2', 1);
      const res = await request(t.url, 'GET', '/api/products/shown');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        id: 'shown',
        initialStock: 10,
        stock: 6,
        sold: 4,
        orders: 2,
        perUserLimit: 3,
        paymentTimeoutMs: 900_000,
        startsAt: null,
        endsAt: null,
        queue: null,
        buckets: 1,
        serverTime: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/),
      });
    });

    it('answers 404 UNKNOWN_PRODUCT for a product with no sale', async () => {
      const res = await request(t.url, 'GET', '/api/products/nothing-here');
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ statusCode: 404, code: 'UNKNOWN_PRODUCT' });
    });
  });

  describe('POST /api/orders', () => {
    it("a replay (the same Idempotency-Key) says the order's status now: reserved, then paid or cancelled", async () => {
      await startSale(t.url, 'replayed', 5);
      const keyed = (userId: string, key: string) =>
        request(t.url, 'POST', '/api/orders', {
          json: { productId: 'replayed', userId },
          headers: { 'idempotency-key': key },
        });
      const first = await keyed('r1', 'rk-1');
      expect(first.body).toMatchObject({ status: 'reserved', remaining: 4 });
      const other = await keyed('r2', 'rk-2');
      expect((await keyed('r1', 'rk-1')).body).toMatchObject({ orderId: first.body.orderId, status: 'reserved' });
      const cancel = await request(t.url, 'POST', `/api/orders/${first.body.orderId}/cancel`);
      expect(cancel.status).toBe(200);
      const body = JSON.stringify({ paymentId: 'pay-r2' });
      const paid = await request(t.url, 'POST', `/api/orders/${other.body.orderId}/pay`, {
        raw: body,
        headers: {
          'content-type': 'application/json',
          'payment-signature': signPayment(PAYMENT_SECRET, other.body.orderId as string, body),
        },
      });
      expect(paid.status).toBe(200);
      for (const [userId, key, first201, now] of [
        ['r1', 'rk-1', first.body, 'cancelled'],
        ['r2', 'rk-2', other.body, 'paid'],
      ] as const) {
        const replay = await keyed(userId, key);
        expect(replay.status).toBe(201);
        expect(replay.headers.get('idempotent-replayed')).toBe('true');
        // The first answer's order and remaining, and what became of it since.
        expect(replay.body).toEqual({ ...first201, status: now });
      }
    });

    it('sells a sale of 5, then SOLD_OUT, then LIMIT_REACHED for a repeat buyer', async () => {
      await startSale(t.url, 'five', 5);
      const remaining: number[] = [];
      for (let i = 1; i <= 5; i++) {
        const res = await buy('five', `buyer-${i}`);
        expect(res.status).toBe(201);
        expect(res.body).toMatchObject({ productId: 'five', userId: `buyer-${i}`, quantity: 1 });
        expect(res.body.orderId).toMatch(/^five\.[0-9a-f-]{36}$/);
        remaining.push(res.body.remaining);
      }
      expect(remaining).toEqual([4, 3, 2, 1, 0]);

      const sixth = await buy('five', 'buyer-6');
      expect(sixth.status).toBe(409);
      expect(sixth.body).toMatchObject({ statusCode: 409, code: 'SOLD_OUT' });

      const repeat = await buy('five', 'buyer-1');
      expect(repeat.status).toBe(409);
      expect(repeat.body.code).toBe('LIMIT_REACHED');

      const k = keys.product('five');
      expect(await client.get(k.stock)).toBe('0');
      expect(await client.xlen(k.orders)).toBe(5);
      // The lock is released after every purchase.
      expect(await client.exists(k.lock)).toBe(0);
    });

    it('never shows one buyer another buyer’s order: no orderId or userId of theirs in any answer', async () => {
      await startSale(t.url, 'private', 1);
      const alice = await buy('private', 'alice');
      expect(alice.status).toBe(201);
      const secret = [alice.body.orderId as string, 'alice'];
      const answers = [
        await buy('private', 'bob'), // SOLD_OUT
        await buy('private', 'bob', 0), // VALIDATION_FAILED
        await request(t.url, 'GET', '/api/products/private'),
        await request(t.url, 'GET', '/health'),
      ];
      for (const res of answers) {
        const text = JSON.stringify(res.body);
        for (const s of secret) expect(text).not.toContain(s);
      }
      // alice's own repeat names only alice's count, never her orderId.
      const repeat = await buy('private', 'alice');
      expect(repeat.body.code).toBe('LIMIT_REACHED');
      expect(JSON.stringify(repeat.body)).not.toContain(alice.body.orderId);
    });

    it('records the order in the stream with the id the buyer was given', async () => {
      await startSale(t.url, 'logged', 3);
      const res = await buy('logged', 'carol');
      const k = keys.product('logged');
      const entries = await client.xrange(k.orders, '-', '+');
      expect(entries).toHaveLength(1);
      // The default strategy (`fenced`) also records the fencing token the order was
      // written under, the one the product's meta says was applied last.
      const fence = await client.hget(k.meta, 'fence');
      expect(fence).toMatch(/^\d+$/);
      expect(entries[0][1]).toEqual(['orderId', res.body.orderId, 'userId', 'carol', 'quantity', '1', 'fence', fence]);
    });

    it('answers INSUFFICIENT_STOCK when fewer are left than asked, and sells the rest', async () => {
      await startSale(t.url, 'few', 3, 5);
      expect((await buy('few', 'dave', 2)).status).toBe(201);
      const res = await buy('few', 'erin', 2);
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ code: 'INSUFFICIENT_STOCK' });
      expect(await snapshot('few')).toMatchObject({ stock: '1', orders: 1 });
      expect((await buy('few', 'erin', 1)).body.remaining).toBe(0);
    });

    it('enforces perUserLimit across several purchases', async () => {
      await startSale(t.url, 'limited', 100, 3);
      expect((await buy('limited', 'frank', 2)).status).toBe(201);
      const over = await buy('limited', 'frank', 2);
      expect(over.status).toBe(409);
      expect(over.body.code).toBe('LIMIT_REACHED');
      expect((await buy('limited', 'frank', 1)).status).toBe(201);
      expect((await buy('limited', 'frank', 1)).body.code).toBe('LIMIT_REACHED');
      expect(await client.hget(keys.product('limited').buyers, 'frank')).toBe('3');
    });

    it('answers LIMIT_REACHED when one order asks for more than the limit', async () => {
      await startSale(t.url, 'one-each', 10, 1);
      const res = await buy('one-each', 'gina', 2);
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('LIMIT_REACHED');
    });

    it('answers 404 UNKNOWN_PRODUCT for a product with no sale', async () => {
      const res = await buy('no-such-product', 'hank');
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('UNKNOWN_PRODUCT');
    });

    it.each([
      ['a missing productId', { userId: 'u' }],
      ['a missing userId', { productId: 'p' }],
      ['a productId with braces', { productId: '{p}', userId: 'u' }],
      ['a userId with a space', { productId: 'p', userId: 'a b' }],
      ['a 65-character userId', { productId: 'p', userId: 'u'.repeat(65) }],
      ['a numeric userId', { productId: 'p', userId: 42 }],
      ['quantity 0', { productId: 'p', userId: 'u', quantity: 0 }],
      ['quantity -1', { productId: 'p', userId: 'u', quantity: -1 }],
      ['quantity 1.5', { productId: 'p', userId: 'u', quantity: 1.5 }],
      ['quantity "1"', { productId: 'p', userId: 'u', quantity: '1' }],
      ['quantity null', { productId: 'p', userId: 'u', quantity: null }],
      ['quantity 1e21', { productId: 'p', userId: 'u', quantity: 1e21 }],
      ['an unknown field', { productId: 'p', userId: 'u', price: 0 }],
      // ValidationPipe deletes these two before validating; they must be refused, not ignored.
      ['a constructor key', { productId: 'p', userId: 'u', constructor: 0 }],
      ['a prototype key', { productId: 'p', userId: 'u', prototype: {} }],
      ['an array body', [{ productId: 'p', userId: 'u' }]],
      ['a string body', 'p'],
      ['a null body', null],
    ])('refuses %s with 400 VALIDATION_FAILED and changes nothing', async (_case, json) => {
      await startSale(t.url, 'p', 5);
      const before = await snapshot('p');
      const res = await request(t.url, 'POST', '/api/orders', { json });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ statusCode: 400, code: 'VALIDATION_FAILED' });
      expect(typeof res.body.message).toBe('string');
      // A VALIDATION_FAILED names each field it refused, so a client can tell which.
      expect(res.body.errors).toEqual(
        expect.arrayContaining([{ field: expect.any(String), messages: expect.any(Array) }]),
      );
      expect(await snapshot('p')).toEqual(before);
    });

    it('says what is wrong with a field: its type before its range', async () => {
      const res = await request(t.url, 'POST', '/api/orders', { json: { productId: 'p', userId: 'u', quantity: '2' } });
      expect(res.body.message).toBe('quantity must be an integer number');
      const put = await request(t.url, 'PUT', '/api/products/p', { json: { stock: '5' }, admin: true });
      expect(put.body.message).toBe('stock must be an integer number');
      const range = await request(t.url, 'POST', '/api/orders', {
        json: { productId: 'p', userId: 'u', quantity: 101 },
      });
      expect(range.body.message).toBe('quantity must not be greater than 100');
    });

    it('names each failing field in the 400 body', async () => {
      const res = await request(t.url, 'POST', '/api/orders', { json: { productId: '', quantity: 0 } });
      const fields = (res.body.errors as { field: string }[]).map((e) => e.field).sort();
      expect(fields).toEqual(['productId', 'quantity', 'userId']);
    });

    it.each([
      // A body its JSON parser refuses has no fields to name: BAD_REQUEST, not VALIDATION_FAILED.
      ['malformed JSON', '{"productId": "p",', 'application/json', 400, 'BAD_REQUEST'],
      ['an empty JSON body', '', 'application/json', 400, 'BAD_REQUEST'],
      ['a __proto__ key', '{"productId":"p","userId":"u","__proto__":{"x":1}}', 'application/json', 400, 'BAD_REQUEST'],
      ['a text/plain body', 'productId=p', 'text/plain', 415, 'UNSUPPORTED_MEDIA_TYPE'],
      ['a form body', 'productId=p&userId=u', 'application/x-www-form-urlencoded', 415, 'UNSUPPORTED_MEDIA_TYPE'],
      [
        'a body over 16 KiB',
        JSON.stringify({ productId: 'p', userId: 'u', pad: 'x'.repeat(17_000) }),
        'application/json',
        413,
        'PAYLOAD_TOO_LARGE',
      ],
    ])('refuses %s with a 4xx and a code', async (_case, raw, contentType, status, code) => {
      await startSale(t.url, 'p', 5);
      const before = await snapshot('p');
      const res = await request(t.url, 'POST', '/api/orders', { raw, headers: { 'content-type': contentType } });
      expect(res.status).toBe(status);
      expect(res.body).toEqual({ statusCode: status, code, message: expect.any(String) });
      openapi.expectDocumented('POST /api/orders', status, res.body);
      expect(await snapshot('p')).toEqual(before);
    });

    it('refuses a badly encoded product id 400 BAD_REQUEST, without echoing the URL', async () => {
      const res = await request(t.url, 'GET', `/api/products/x${'y'.repeat(80)}%E0%A4%A`);
      expect(res.body).toEqual({ statusCode: 400, code: 'BAD_REQUEST', message: expect.any(String) });
      expect(res.body.message).not.toMatch(/yyy|\/api\/products/);
      openapi.expectDocumented('GET /api/products/:id', 400, res.body);
    });

    /** What the server writes back for bytes sent as they are, until it closes the socket. */
    function rawExchange(bytes: string): Promise<{ status: number; head: string; body: Record<string, unknown> }> {
      const { hostname, port } = new URL(t.url);
      return new Promise((resolve, reject) => {
        const socket = connect(Number(port), hostname, () => socket.end(bytes));
        let answer = '';
        socket.setEncoding('utf8').on('data', (chunk: string) => (answer += chunk));
        // The server closes with the rest of a long request unread, which the kernel
        // says with a reset: the answer before it is what counts.
        socket.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' ? undefined : reject(err)));
        socket.on('close', () => {
          const [head, body] = answer.split('\r\n\r\n');
          resolve({ status: Number(head.split(' ')[1]), head, body: JSON.parse(body) as Record<string, unknown> });
        });
      });
    }

    it.each([
      [
        'headers over 16 KiB',
        `GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`,
        431,
        'HEADERS_TOO_LARGE',
        'GET /health',
      ],
      // Node's 16 KiB bound is on the request line and the headers together: a URL past
      // it is refused there, before the router could answer 414 (and read past the 64 KiB
      // Node reads at once).
      [
        'a 70,000-character URL',
        `GET /api/products/${'a'.repeat(70_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
        431,
        'HEADERS_TOO_LARGE',
        'GET /api/products/:id',
      ],
      // Not a request of any route: no operation of the document to hold it against.
      ['bytes that are not HTTP', 'NOT HTTP AT ALL\r\n\r\n', 400, 'BAD_REQUEST', null],
    ])(
      'answers %s (refused by the HTTP parser, before any route) with the same body shape',
      async (_case, bytes, status, code, route) => {
        const res = await rawExchange(bytes);
        expect(res.status).toBe(status);
        expect(res.body).toEqual({ statusCode: status, code, message: expect.any(String) });
        expect(res.head).toMatch(/\r\nX-Request-Id: [\w-]+\r\n/);
        if (route) openapi.expectDocumented(route, res.status, res.body);
      },
    );

    it('never answers a pipelined request with the error of the garbage after it: the connection is cut instead', async () => {
      await startSale(t.url, 'pipelined', 5);
      // The purchase is still in flight (waiting for a lock another process holds)
      // when the parser meets the garbage behind it on the same connection.
      await client.set(keys.product('pipelined').lock, 'another-holder', 'PX', 300);
      const body = JSON.stringify({ productId: 'pipelined', userId: 'pipelining-buyer' });
      const { hostname, port } = new URL(t.url);
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), hostname, () =>
          socket.end(
            `POST /api/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
              `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}NOT HTTP AT ALL\r\n\r\n`,
          ),
        );
        let text = '';
        socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        socket.on('error', reject).on('close', () => resolve(text));
      });
      expect(answer).not.toMatch(/^HTTP\/1\.1 400/);
    });

    it('answers a path parameter over the router’s length limit with 414 URI_TOO_LONG, without echoing it', async () => {
      const res = await request(t.url, 'GET', `/api/products/${'a'.repeat(5_000)}`);
      expect(res.status).toBe(414);
      expect(res.body).toEqual({ statusCode: 414, code: 'URI_TOO_LONG', message: expect.any(String) });
      expect(res.body.message).not.toMatch(/aaa|\/api\/products/);
      openapi.expectDocumented('GET /api/products/:id', 414, res.body);
    });

    it('serves the longest order id there is (a 64-character product id, a dot, a UUID) on every order route', async () => {
      const product = 'p'.repeat(64);
      await startSale(t.url, product, 3);
      const bought = await buy(product, 'long-id');
      const orderId = bought.body.orderId as string;
      expect(orderId).toHaveLength(101);
      expect((await request(t.url, 'GET', `/api/orders/${orderId}`)).body).toMatchObject({ status: 'reserved' });
      const paid = await request(t.url, 'POST', `/api/orders/${orderId}/pay`, {
        json: { paymentId: 'p' },
        admin: true,
      });
      expect(paid.body).toMatchObject({ status: 'paid' });
      const other = (await buy(product, 'long-id-2')).body.orderId as string;
      expect((await request(t.url, 'POST', `/api/orders/${other}/cancel`)).body).toMatchObject({ status: 'cancelled' });
    });

    it('answers a request whose body stops halfway 408 REQUEST_TIMEOUT after REQUEST_TIMEOUT_MS, and closes it', async () => {
      const slow = await startTestApp({
        REDIS_URL: stack.redis.url,
        KEY_PREFIX: uniquePrefix('slow'),
        REQUEST_TIMEOUT_MS: '1000',
      });
      try {
        const { hostname, port } = new URL(slow.url);
        const started = Date.now();
        const answer = await new Promise<string>((resolve, reject) => {
          const socket = connect(Number(port), hostname, () =>
            socket.write(
              'POST /api/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n' +
                '{"productId":"p","userId":"u1"'.padEnd(50, ' '),
            ),
          );
          let text = '';
          socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
          socket.on('error', reject).on('close', () => resolve(text));
        });
        // Node checks the deadline once a second: answered between 1 s and about 2 s.
        expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
        const [head, body] = answer.split('\r\n\r\n');
        expect(head).toMatch(/^HTTP\/1\.1 408 /);
        expect(head).toMatch(/\r\nX-Request-Id: [\w-]+\r\n/);
        expect(JSON.parse(body)).toEqual({ statusCode: 408, code: 'REQUEST_TIMEOUT', message: expect.any(String) });
        openapi.expectDocumented('POST /api/orders', 408, JSON.parse(body));
      } finally {
        await slow.close();
      }
    });

    it('answers an unknown route with 404 NOT_FOUND', async () => {
      const res = await request(t.url, 'DELETE', '/api/orders');
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('NOT_FOUND');
    });
  });

  describe('POST /api/orders/:orderId/pay: only the payment provider confirms a payment', () => {
    /** A pay callback, its body as sent and its Payment-Signature header (none: unsigned). */
    const payWith = (url: string, orderId: string, body: string, signature?: string, admin = false) =>
      request(url, 'POST', `/api/orders/${orderId}/pay`, {
        raw: body,
        headers: { 'content-type': 'application/json', ...(signature ? { 'payment-signature': signature } : {}) },
        admin,
      });
    const now = () => Math.floor(Date.now() / 1000);

    it('refuses 401 PAYMENT_SIGNATURE_INVALID, paying nothing, unless the callback is signed with PAYMENT_WEBHOOK_SECRET or sent with the admin token', async () => {
      await startSale(t.url, 'paid-for', 5);
      const id = (await buy('paid-for', 'payer')).body.orderId as string;
      const mine = (await buy('paid-for', 'mallory')).body.orderId as string;
      const body = JSON.stringify({ paymentId: 'pay-1' });
      const refusals: [string, string | undefined, string, RegExp][] = [
        ['unsigned', undefined, body, /Payment-Signature header is missing/],
        [
          'signed with another secret',
          signPayment('Wrong-secret-8Hq2Lm5Xz1Pc7Rv4Tb9Kd', id, body),
          body,
          /does not match/,
        ],
        // The signature covers the bytes sent: another paymentId under a captured signature.
        [
          'another body',
          signPayment(PAYMENT_SECRET, id, body),
          JSON.stringify({ paymentId: 'pay-2' }),
          /does not match/,
        ],
        // And the order: a callback captured for one order pays no other (the body names only the payment).
        ['signed for another order', signPayment(PAYMENT_SECRET, mine, body), body, /does not match/],
        [
          'signed too long ago',
          signPayment(PAYMENT_SECRET, id, body, now() - PAYMENT_SIGNATURE_TOLERANCE_S - 60),
          body,
          /more than 300 s from this server's clock/,
        ],
        ['malformed', 'v1=abc', body, /is not t=<unix seconds>,v1=<64 hex digits>/],
      ];
      for (const [why, signature, sent, message] of refusals) {
        const res = await payWith(t.url, id, sent, signature);
        expect({ why, status: res.status, code: res.body.code }).toEqual({
          why,
          status: 401,
          code: 'PAYMENT_SIGNATURE_INVALID',
        });
        expect(res.body.message).toMatch(message);
      }
      // A buyer's bearer token is not the admin's either.
      const bearer = await request(t.url, 'POST', `/api/orders/${id}/pay`, {
        raw: body,
        headers: { 'content-type': 'application/json', authorization: 'Bearer not-the-admin-token' },
      });
      expect(bearer.body.code).toBe('PAYMENT_SIGNATURE_INVALID');
      expect((await request(t.url, 'GET', `/api/orders/${id}`)).body).toMatchObject({ status: 'reserved' });

      // The provider's signed callback pays it; its retry with the same signature answers the same.
      const signature = signPayment(PAYMENT_SECRET, id, body);
      expect((await payWith(t.url, id, body, signature)).body).toMatchObject({ status: 'paid', paymentId: 'pay-1' });
      expect((await payWith(t.url, id, body, signature)).status).toBe(200);
      // Replayed to another order, the same callback still pays nothing there.
      expect((await payWith(t.url, mine, body, signature)).body.code).toBe('PAYMENT_SIGNATURE_INVALID');
      expect((await request(t.url, 'GET', `/api/orders/${mine}`)).body).toMatchObject({ status: 'reserved' });
      // A secret being rotated: any v1 of the header may hold.
      const other = (await buy('paid-for', 'rotated')).body.orderId as string;
      const rotated = `${signPayment(PAYMENT_SECRET, other, body)},v1=${'0'.repeat(64)}`;
      expect((await payWith(t.url, other, body, rotated)).status).toBe(200);
      // An operator marks a payment by hand with the admin token.
      const byHand = (await buy('paid-for', 'by-hand')).body.orderId as string;
      expect((await payWith(t.url, byHand, body, undefined, true)).body).toMatchObject({ status: 'paid' });
    });

    it('without PAYMENT_WEBHOOK_SECRET only the admin token pays', async () => {
      const bare = await startTestApp({
        REDIS_URL: stack.redis.url,
        KEY_PREFIX: uniquePrefix('no-webhook'),
        PAYMENT_WEBHOOK_SECRET: '',
      });
      try {
        await startSale(bare.url, 'p', 2);
        const id = (await request(bare.url, 'POST', '/api/orders', { json: { productId: 'p', userId: 'u' } })).body
          .orderId as string;
        const body = JSON.stringify({ paymentId: 'pay-x' });
        const signed = await payWith(bare.url, id, body, signPayment(PAYMENT_SECRET, id, body));
        expect(signed.body).toMatchObject({ statusCode: 401, code: 'PAYMENT_SIGNATURE_INVALID' });
        expect(signed.body.message).toMatch(/no PAYMENT_WEBHOOK_SECRET, so only the admin token/);
        expect((await payWith(bare.url, id, body, undefined, true)).status).toBe(200);
      } finally {
        await bare.close();
      }
    });
  });

  describe('X-Request-Id', () => {
    /** This process's random prefix and a counter. */
    const OURS = /^[\w-]{8}-[0-9a-z]+$/;

    it("is on every answer, one per request: a route's, a purchase's from its hook, the door's, a 400, a 404, a 414", async () => {
      await startSale(t.url, 'ids', 1);
      const door = stack.app.app.get(DoorRefusals);
      const answers = [
        await request(t.url, 'GET', '/health'),
        await request(t.url, 'POST', '/api/products/ids/orders', { json: { userId: 'first' } }),
        // SOLD_OUT from Redis, which the door learns; then from the door.
        await request(t.url, 'POST', '/api/products/ids/orders', { json: { userId: 'second' } }),
        await request(t.url, 'POST', '/api/products/ids/orders', { json: { userId: 'third' } }),
        await request(t.url, 'POST', '/api/orders', { json: { productId: 'ids' } }),
        await request(t.url, 'GET', '/no/such/route'),
        await request(t.url, 'GET', `/api/products/${'a'.repeat(129)}`),
      ];
      expect(answers.map((a) => a.status)).toEqual([200, 201, 409, 409, 400, 404, 414]);
      expect(door.answered).toBeGreaterThan(0);
      const ids = answers.map((a) => a.headers.get('x-request-id'));
      for (const id of ids) expect(id).toMatch(OURS);
      expect(new Set(ids).size).toBe(ids.length);
    });

    it("takes a proxy's X-Request-Id only when TRUST_PROXY trusts the socket's peer, and only a plain token", async () => {
      const given = 'edge-7f3a9c.42:trace/1+x=@y';
      const idOf = async (url: string, id: string) =>
        (await fetch(`${url}/health`, { headers: { 'x-request-id': id } })).headers.get('x-request-id');
      // This app has no TRUST_PROXY: anyone could write what it likes into the log.
      expect(await idOf(t.url, given)).toMatch(OURS);
      for (const [trust, trusted] of [
        ['loopback', true],
        ['1', true],
        ['true', true],
        ['127.0.0.1', true],
        ['10.0.0.0/8,192.168.1.7', false],
      ] as const) {
        const app = await startTestApp({
          REDIS_URL: stack.redis.url,
          KEY_PREFIX: uniquePrefix('ids'),
          TRUST_PROXY: trust,
        });
        try {
          expect({ trust, id: await idOf(app.url, given) }).toEqual({
            trust,
            id: trusted ? given : expect.stringMatching(OURS),
          });
          for (const bad of ['x'.repeat(129), 'has space', 'a;b', 'a"b', 'a,b']) {
            expect({ trust, bad, id: await idOf(app.url, bad) }).toEqual({
              trust,
              bad,
              id: expect.stringMatching(OURS),
            });
          }
        } finally {
          await app.close();
        }
      }
    });
  });

  describe('GET /health', () => {
    it('is 200 while Redis answers', async () => {
      const res = await request(t.url, 'GET', '/health');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        status: 'ok',
        redis: 'up',
        strategy: 'fenced',
        strategyFamily: 'lock',
        unsafe: false,
        lostLocks: 0,
      });
    });

    it("says unsafe, and names the hook, when the fault suite's FAULT_STOP_AT is set", async () => {
      const hooked = await startTestApp({
        REDIS_URL: stack.redis.url,
        KEY_PREFIX: uniquePrefix('hooked'),
        FAULT_STOP_AT: 'before-write:2',
        ALLOW_UNSAFE: '1',
      });
      try {
        const res = await request(hooked.url, 'GET', '/health');
        expect(res.body).toMatchObject({
          status: 'ok',
          strategy: 'fenced',
          unsafe: true,
          faultStopAt: 'before-write:2',
        });
      } finally {
        await hooked.close();
      }
    });
  });
});
