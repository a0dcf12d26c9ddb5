import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { waitUntil } from '../bench/faults/kit';
import { processState, startApp, stopAll } from '../harness/processes';
import { KeyLayout } from '../src/redis/key-layout';
import { MARK_TAGS, markWritten } from '../src/redis/shard-marks';
import { deleteProduct, deleteProductKeys } from '../src/redis/lua-scripts';
import { ADMIN_TOKEN, pay, request, startTestApp, TestApp } from './helpers/app';
import { TestRedis, uniquePrefix } from './helpers/redis';
import { useRedisAndPostgres } from './helpers/stack';

/**
 * The admin's view of the catalog and its orders: GET /api/products pages the products
 * set with SSCAN (never the whole set in one reply), GET /api/products/:id/orders pages
 * PostgreSQL's orders by order id. Real redis-server and PostgreSQL processes.
 */
describe('the catalog and its orders, for an admin', () => {
  const stack = useRedisAndPostgres('catalog_test');
  let redis: TestRedis;
  let client: Redis;
  beforeAll(() => {
    ({ redis, client } = stack);
  });

  afterAll(() => stopAll());

  /** More env for the DELETE's tests: TELEMETRY=0, no live counts published into the product's live hash on a timer (its keys hold still). */
  const QUIET = { TELEMETRY: '0' };

  async function app(prefix: string, settles: boolean, extra: Record<string, string> = {}): Promise<TestApp> {
    const env: Record<string, string> = { REDIS_URL: redis.url, KEY_PREFIX: prefix, ...extra };
    if (settles) env.DATABASE_URL = await stack.database();
    return stack.opened(await startTestApp(env));
  }

  const admin = (url: string, path: string) => request(url, 'GET', path, { admin: true });

  it('pages through a catalog larger than a page, every product listed once at least, as GET gives it', async () => {
    const prefix = uniquePrefix('catalog');
    const { url } = await app(prefix, false);
    // Ids that are not integers and more than set-max-listpack-entries (128): the set is a
    // hash table, which SSCAN walks COUNT buckets at a time.
    const ids = Array.from({ length: 300 }, (_, i) => `item-${i}`);
    for (const [i, id] of ids.entries()) {
      const res = await request(url, 'PUT', `/api/products/${id}`, { json: { stock: i + 1 }, admin: true });
      expect(res.status).toBe(200);
    }
    // Listed, no sale (its meta gone): not a product, left out.
    await client.sadd(new KeyLayout(prefix).products, 'listed-only');

    const seen = new Map<string, Record<string, unknown>>();
    let pages = 0;
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? '?limit=50' : `?limit=50&cursor=${cursor}`;
      const res = await admin(url, `/api/products${query}`);
      expect(res.status).toBe(200);
      pages++;
      expect(pages).toBeLessThan(100);
      // Far fewer than the whole catalog in one reply.
      expect(res.body.items.length).toBeLessThan(200);
      for (const item of res.body.items as Record<string, unknown>[]) seen.set(item.id as string, item);
      cursor = res.body.cursor as string | null;
    } while (cursor !== null);

    expect(pages).toBeGreaterThan(1);
    expect([...seen.keys()].sort()).toEqual([...ids].sort());
    const one = await request(url, 'GET', '/api/products/item-41');
    expect({ ...seen.get('item-41'), serverTime: null }).toEqual({ ...one.body, serverTime: null });
    expect(seen.get('item-41')).toMatchObject({ stock: 42, initialStock: 42, sold: 0 });
  }, 120_000);

  it('answers only the admin: 401 UNAUTHORIZED as PUT does, with no token or a wrong one', async () => {
    const { url } = await app(uniquePrefix('catalog-auth'), true);
    for (const path of ['/api/products', '/api/products/phone/orders']) {
      for (const headers of [{}, { authorization: 'Bearer not-the-token' }] as Record<string, string>[]) {
        const res = await request(url, 'GET', path, { headers });
        expect(res.status).toBe(401);
        expect(res.body).toMatchObject({ statusCode: 401, code: 'UNAUTHORIZED' });
      }
    }
  });

  it('DELETE answers only the admin, as PUT: 401 UNAUTHORIZED with no token or a wrong one, nothing changed', async () => {
    const prefix = uniquePrefix('delete-auth');
    const { url } = await app(prefix, false, QUIET);
    expect((await request(url, 'PUT', '/api/products/phone', { json: { stock: 5 }, admin: true })).status).toBe(200);
    const before = await productKeys(prefix, 'phone');
    for (const headers of [{}, { authorization: 'Bearer not-the-token' }] as Record<string, string>[]) {
      const res = await request(url, 'DELETE', '/api/products/phone', { headers });
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ statusCode: 401, code: 'UNAUTHORIZED' });
    }
    expect(await productKeys(prefix, 'phone')).toEqual(before);
    expect(await client.sismember(new KeyLayout(prefix).products, 'phone')).toBe(1);
  });

  it.each([
    '/api/products?limit=0',
    '/api/products?limit=501',
    '/api/products?limit=abc',
    '/api/products?limit=1&limit=2',
    '/api/products?cursor=-1',
    '/api/products?cursor=99999999999999999999',
    '/api/products?page=2',
    '/api/products/phone/orders?status=shipped',
    '/api/products/phone/orders?cursor=not-an-order',
    '/api/products/phone/orders?limit=1000',
    '/api/products/bad|id/orders',
    'DELETE /api/products/bad|id',
    'DELETE /api/products/phone?discardOrders=yes',
    'DELETE /api/products/phone?switchStrategy=1',
    'DELETE /api/products/phone?force=true',
  ])('refuses %s with 400 VALIDATION_FAILED', async (route) => {
    const { url } = await app(uniquePrefix('catalog-bad'), true);
    const [method, path] = route.startsWith('DELETE ') ? ['DELETE', route.slice(7)] : ['GET', route];
    const res = await request(url, method, path, { admin: true });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ statusCode: 400, code: 'VALIDATION_FAILED' });
  });

  it("pages a product's settled orders by order id, filtered by status, from PostgreSQL", async () => {
    const { url } = await app(uniquePrefix('catalog-orders'), true);
    for (const id of ['phone', 'other']) {
      const res = await request(url, 'PUT', `/api/products/${id}`, { json: { stock: 5 }, admin: true });
      expect(res.status).toBe(200);
    }
    const placed: Record<string, string> = {};
    for (const user of ['u1', 'u2', 'u3', 'u4', 'u5']) {
      const res = await request(url, 'POST', '/api/orders', { json: { productId: 'phone', userId: user } });
      expect(res.status).toBe(201);
      placed[user] = res.body.orderId as string;
    }
    expect((await request(url, 'POST', '/api/orders', { json: { productId: 'other', userId: 'u1' } })).status).toBe(
      201,
    );
    expect((await pay(url, placed.u1, 'pay-1')).status).toBe(200);
    expect((await pay(url, placed.u2, 'pay-2')).status).toBe(200);
    expect((await request(url, 'POST', `/api/orders/${placed.u3}/cancel`)).status).toBe(200);
    const want = {
      [placed.u1]: 'paid',
      [placed.u2]: 'paid',
      [placed.u3]: 'cancelled',
      [placed.u4]: 'reserved',
      [placed.u5]: 'reserved',
    };

    const all = async (query: string) => {
      const items: Record<string, unknown>[] = [];
      const pages: number[] = [];
      let cursor: string | null = null;
      do {
        const res = await admin(url, `/api/products/phone/orders?limit=2${query}${cursor ? `&cursor=${cursor}` : ''}`);
        expect(res.status).toBe(200);
        items.push(...(res.body.items as Record<string, unknown>[]));
        pages.push(res.body.items.length as number);
        cursor = res.body.cursor as string | null;
      } while (cursor !== null);
      return { items, pages };
    };
    // Settlement is asynchronous: wait (bounded) until PostgreSQL holds every order in its status.
    let listed = await all('');
    for (let i = 0; JSON.stringify(statuses(listed.items)) !== JSON.stringify(sorted(want)); i++) {
      expect(i).toBeLessThan(200);
      await sleep(50);
      listed = await all('');
    }
    expect(listed.pages).toEqual([2, 2, 1]);
    expect(listed.items.map((o) => o.orderId)).toEqual(Object.keys(want).sort());
    expect(listed.items.find((o) => o.orderId === placed.u1)).toMatchObject({
      userId: 'u1',
      quantity: 1,
      status: 'paid',
      paymentId: 'pay-1',
    });
    const u4 = listed.items.find((o) => o.orderId === placed.u4)!;
    expect(u4.paymentId).toBeNull();
    expect(Date.parse(u4.createdAt as string)).toBeLessThanOrEqual(Date.parse(u4.updatedAt as string));

    const ofStatus = async (status: string) => (await all(`&status=${status}`)).items.map((o) => o.orderId);
    expect(await ofStatus('paid')).toEqual([placed.u1, placed.u2].sort());
    expect(await ofStatus('cancelled')).toEqual([placed.u3]);
    expect(await ofStatus('reserved')).toEqual([placed.u4, placed.u5].sort());
    expect(await ofStatus('expired')).toEqual([]);
    // A product with no orders settled: an empty last page.
    expect((await admin(url, '/api/products/nothing/orders')).body).toEqual({ items: [], cursor: null });
  }, 60_000);

  it('DELETE retires a product only once PostgreSQL holds every order and none is reserved: ORDERS_UNSETTLED, RESERVATIONS_OPEN, then its keys gone, its orders kept', async () => {
    const prefix = uniquePrefix('delete-settled');
    const keys = new KeyLayout(prefix);
    const k = keys.product('phone');
    // Settled by a settler elsewhere (npm run settle), not running yet: the sale's order
    // log has its group from the start, and nothing settles it until the settler comes.
    await client.set(keys.settling, '1');
    const { url } = await app(prefix, false, QUIET);
    const put = await request(url, 'PUT', '/api/products/phone', {
      json: { stock: 5, paymentTimeoutMs: 600_000 },
      admin: true,
    });
    expect(put.status).toBe(200);
    const placed: string[] = [];
    for (const user of ['u1', 'u2', 'u3']) {
      const res = await request(url, 'POST', '/api/orders', { json: { productId: 'phone', userId: user } });
      expect(res.status).toBe(201);
      placed.push(res.body.orderId as string);
    }
    const refusedAs = async (code: string, path = '/api/products/phone') => {
      const before = await productKeys(prefix, 'phone');
      const res = await request(url, 'DELETE', path, { admin: true });
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ statusCode: 409, code });
      // Nothing changed: every key, its type and its size; still listed.
      expect(await productKeys(prefix, 'phone')).toEqual(before);
      expect(await client.sismember(keys.products, 'phone')).toBe(1);
      return res.body.message as string;
    };
    // Three orders nobody has settled: refused, and discardOrders does not override it.
    expect(await refusedAs('ORDERS_UNSETTLED')).toBe(
      'product "phone" has 3 order events not yet settled into PostgreSQL: deleting the product would lose them; retry once settlement has caught up (GET /health: settlement)',
    );
    await refusedAs('ORDERS_UNSETTLED', '/api/products/phone?discardOrders=true');

    // The settler comes (an instance with DATABASE_URL) and takes them all in, trimming
    // the stream of what it settled (the DELETE asks the group, not the stream's length).
    const settler = await app(prefix, true, { ...QUIET, SETTLE_TRIM: '1' });
    await waitUntil('the three orders in PostgreSQL', async () => {
      const res = await admin(settler.url, '/api/products/phone/orders');
      return res.status === 200 && res.body.items.length === 3;
    });
    await waitUntil(
      'the group to acknowledge them',
      async () => Number((await client.xpending(k.orders, 'settle'))[0]) === 0,
    );
    // Settled, but all three wait for their payment.
    expect(await refusedAs('RESERVATIONS_OPEN')).toMatch(
      /^product "phone" has 3 orders still waiting for their payment/,
    );

    // One paid, one cancelled by its buyer, the last cancelled by the close (which waits for settlement).
    expect((await pay(url, placed[0], 'pay-1')).status).toBe(200);
    expect((await request(url, 'POST', `/api/orders/${placed[1]}/cancel`)).status).toBe(200);
    const closed = await request(settler.url, 'POST', '/api/products/phone/close', { admin: true });
    expect(closed.body).toMatchObject({ cancelled: 1, unsettled: 0 });

    await waitUntil('the settler to trim what it settled', async () => (await client.xlen(k.orders)) === 0);
    const present = await productKeys(prefix, 'phone');
    const gone = await request(url, 'DELETE', '/api/products/phone', { admin: true });
    expect(gone.status).toBe(200);
    expect(gone.body).toEqual({ id: 'phone', keys: Object.keys(present).length - 1, discardedOrders: 0 });
    // Every key of the product gone but the fencing counter (fenced: never restarted).
    expect(Object.keys(present)).toContain(k.fence);
    expect(Object.keys(await productKeys(prefix, 'phone'))).toEqual([k.fence]);
    expect(await client.sismember(keys.products, 'phone')).toBe(0);
    expect((await admin(url, '/api/products')).body.items).toEqual([]);
    // PostgreSQL keeps the orders, each in its final status.
    const rows = (await admin(settler.url, '/api/products/phone/orders')).body.items as Record<string, unknown>[];
    expect(Object.fromEntries(rows.map((o) => [o.orderId, o.status]))).toEqual({
      [placed[0]]: 'paid',
      [placed[1]]: 'cancelled',
      [placed[2]]: 'cancelled',
    });
    // A purchase after it finds no product, and writes nothing; a second DELETE neither.
    const late = await request(url, 'POST', '/api/orders', { json: { productId: 'phone', userId: 'u9' } });
    expect(late.status).toBe(404);
    expect(late.body).toMatchObject({ code: 'UNKNOWN_PRODUCT' });
    expect((await request(url, 'DELETE', '/api/products/phone', { admin: true })).body).toMatchObject({
      statusCode: 404,
      code: 'UNKNOWN_PRODUCT',
    });
    await sleep(100);
    expect(Object.keys(await productKeys(prefix, 'phone'))).toEqual([k.fence]);
    // Marks left behind (as by an outcome written just before a DELETE, here of this
    // product and of one this settler never met): the settler drops them, and makes no
    // log for a product that is gone.
    const marks = keys.marks(MARK_TAGS[0]).settle;
    for (const id of ['phone', 'never-met']) await markWritten(client, keys, id);
    await waitUntil('the settler to drop the marks', async () => (await client.zcard(marks)) === 0);
    expect(Object.keys(await productKeys(prefix, 'phone'))).toEqual([k.fence]);
    expect(await productKeys(prefix, 'never-met')).toEqual({});
  }, 60_000);

  it('DELETE where orders are not settled at all: they exist only in Redis and go only with ?discardOrders=true', async () => {
    const prefix = uniquePrefix('delete-unsettled');
    const keys = new KeyLayout(prefix);
    const { url } = await app(prefix, false, QUIET);
    for (const id of ['phone', 'idle']) {
      expect((await request(url, 'PUT', `/api/products/${id}`, { json: { stock: 5 }, admin: true })).status).toBe(200);
    }
    for (const user of ['u1', 'u2']) {
      expect((await request(url, 'POST', '/api/orders', { json: { productId: 'phone', userId: user } })).status).toBe(
        201,
      );
    }
    const before = await productKeys(prefix, 'phone');
    const refused = await request(url, 'DELETE', '/api/products/phone', { admin: true });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: 'ORDERS_UNSETTLED' });
    expect(refused.body.message).toBe(
      'product "phone" has 2 orders that exist only in Redis (orders are not settled into PostgreSQL here): deleting the product deletes them; send the DELETE again with ?discardOrders=true to do so',
    );
    expect(await productKeys(prefix, 'phone')).toEqual(before);

    const discarded = await request(url, 'DELETE', '/api/products/phone?discardOrders=true', { admin: true });
    expect(discarded.body).toEqual({ id: 'phone', keys: Object.keys(before).length - 1, discardedOrders: 2 });
    expect(Object.keys(await productKeys(prefix, 'phone'))).toEqual([keys.product('phone').fence]);
    // A sale that never sold goes without asking.
    const idle = await request(url, 'DELETE', '/api/products/idle', { admin: true });
    expect(idle.body).toMatchObject({ id: 'idle', discardedOrders: 0 });
    expect((await client.smembers(keys.products)).sort()).toEqual([]);
    // A new sale of the same id starts from nothing.
    expect((await request(url, 'PUT', '/api/products/phone', { json: { stock: 3 }, admin: true })).body).toMatchObject({
      stock: 3,
      orders: 0,
    });
    expect(await client.sismember(keys.products, 'phone')).toBe(1);
  });

  it("this instance's door forgets a deleted product at once: a purchase after the DELETE hears UNKNOWN_PRODUCT, not the sell-out it learnt", async () => {
    const prefix = uniquePrefix('delete-door');
    const { url } = await app(prefix, false, QUIET);
    expect((await request(url, 'PUT', '/api/products/phone', { json: { stock: 1 }, admin: true })).status).toBe(200);
    const buy = (userId: string, headers: Record<string, string> = {}) =>
      request(url, 'POST', '/api/products/phone/orders', { json: { userId }, headers });
    expect((await buy('u1', { 'idempotency-key': 'u1-first' })).status).toBe(201);
    // Sold out: the door now answers the product's purchases itself for DOOR_TRUST_MS.
    expect((await buy('u2')).body).toMatchObject({ code: 'SOLD_OUT' });
    const gone = await request(url, 'DELETE', '/api/products/phone?discardOrders=true', { admin: true });
    expect(gone.body).toMatchObject({ id: 'phone', discardedOrders: 1 });
    const after = await buy('u3');
    expect(after.status).toBe(404);
    expect(after.body).toMatchObject({ code: 'UNKNOWN_PRODUCT' });
    // The Idempotency-Key outcomes went with it: a retry of the first purchase finds no product either.
    expect((await buy('u1', { 'idempotency-key': 'u1-first' })).body).toMatchObject({ code: 'UNKNOWN_PRODUCT' });
    expect(Object.keys(await productKeys(prefix, 'phone'))).toEqual([new KeyLayout(prefix).product('phone').fence]);
  });

  it("delete-product-11.lua asks the stream what follows the group's last delivered id, not lag, which Redis cannot count after a deletion", async () => {
    const k = new KeyLayout(uniquePrefix('delete-lag')).product('phone');
    await client.hset(k.meta, 'initialStock', '3');
    await client.xgroup('CREATE', k.orders, 'settle', '0', 'MKSTREAM');
    const ids = [];
    for (const orderId of ['o1', 'o2', 'o3']) ids.push((await client.xadd(k.orders, '*', 'orderId', orderId))!);
    // Two delivered and acknowledged; the third, never delivered, deleted (XDEL): lag is nil now.
    await client.xreadgroup('GROUP', 'settle', 'c', 'COUNT', 2, 'STREAMS', k.orders, '>');
    await client.xack(k.orders, 'settle', ids[0], ids[1]);
    await client.xdel(k.orders, ids[2]);
    const group = (await client.xinfo('GROUPS', k.orders)) as unknown[][];
    expect(group[0][group[0].indexOf('lag') + 1]).toBeNull();
    const run = () => deleteProduct.run(client, deleteProductKeys(k), '0', '', '0', '1', '0');

    // An entry added after the deletion, not delivered: unsettled (its count a floor, 1).
    await client.xadd(k.orders, '*', 'orderId', 'o4');
    expect(await run()).toEqual(['UNSETTLED', 1]);
    expect(await client.xlen(k.orders)).toBe(3);
    // Delivered and acknowledged: nothing follows the last delivered id, nothing pending.
    const [[, [[last]]]] = (await client.xreadgroup('GROUP', 'settle', 'c', 'STREAMS', k.orders, '>')) as [
      string,
      [string, string[]][],
    ][];
    await client.xack(k.orders, 'settle', last);
    expect(await run()).toEqual(['OK', 2, 0]);
    expect(await client.exists(k.meta, k.orders)).toBe(0);
  });

  it('a crash between the two steps (keys deleted, still listed): GET /api/products leaves it out, a DELETE again answers 404 and unlists it', async () => {
    const prefix = uniquePrefix('delete-crash');
    const keys = new KeyLayout(prefix);
    const { url } = await app(prefix, false, QUIET);
    expect((await request(url, 'PUT', '/api/products/phone', { json: { stock: 5 }, admin: true })).status).toBe(200);
    // The first step's effect alone: every key of the product gone, the id still in the set.
    const k = keys.product('phone');
    await client.del(...Object.values(k));
    expect(await client.sismember(keys.products, 'phone')).toBe(1);
    expect((await admin(url, '/api/products')).body).toEqual({ items: [], cursor: null });
    const again = await request(url, 'DELETE', '/api/products/phone', { admin: true });
    expect(again.status).toBe(404);
    expect(again.body).toMatchObject({ code: 'UNKNOWN_PRODUCT' });
    expect(await client.sismember(keys.products, 'phone')).toBe(0);
  });

  it('a purchase stopped between its read and its write under the lock: the racing DELETE waits for it, then refuses: the order it wrote is counted', async () => {
    const prefix = uniquePrefix('delete-race');
    const k = new KeyLayout(prefix).product('phone');
    // The buyer's instance, a real process: it stops itself (SIGSTOP) at its first write,
    // holding the product's lock (fenced, the default).
    const buyer = await startApp({
      env: {
        REDIS_URL: redis.url,
        KEY_PREFIX: prefix,
        ADMIN_TOKEN,
        LOG_LEVEL: 'error',
        FAULT_STOP_AT: 'before-write:1',
        ALLOW_UNSAFE: '1',
      },
    });
    const { url } = await app(prefix, false, QUIET);
    expect((await request(url, 'PUT', '/api/products/phone', { json: { stock: 5 }, admin: true })).status).toBe(200);
    const bought = request(buyer.url, 'POST', '/api/orders', { json: { productId: 'phone', userId: 'u1' } });
    await waitUntil('the buyer to stop at its write', async () => processState(buyer.pid) === 'T');
    let answered = false;
    const deleted = request(url, 'DELETE', '/api/products/phone', { admin: true }).finally(() => {
      answered = true;
    });
    // The DELETE waits for the lock (its instance subscribed to the lock's release), or,
    // run outside the lock, it has answered already.
    await waitUntil('the DELETE to wait for the lock, or to answer', async () => {
      const [, waiting] = (await client.call('PUBSUB', 'SHARDNUMSUB', `${k.lock}:released`)) as [string, number];
      return waiting > 0 || answered;
    });
    process.kill(buyer.pid, 'SIGCONT');
    // The purchase landed first; the DELETE, run after it, saw its order (Redis's alone
    // here: no settlement) and refused, deleting nothing.
    const res = await deleted;
    expect(res.body).toMatchObject({ statusCode: 409, code: 'ORDERS_UNSETTLED' });
    expect((await bought).status).toBe(201);
    expect(res.body.message).toMatch(/^product "phone" has 1 order that exists only in Redis/);
    expect(await client.xlen(k.orders)).toBe(1);
    expect(await client.get(k.stock)).toBe('4');
    expect(await client.sismember(new KeyLayout(prefix).products, 'phone')).toBe(1);
  }, 60_000);

  it('says 501 SETTLEMENT_OFF where the instance does not settle (no DATABASE_URL)', async () => {
    const { url } = await app(uniquePrefix('catalog-off'), false);
    const res = await admin(url, '/api/products/phone/orders');
    expect(res.status).toBe(501);
    expect(res.body).toMatchObject({ statusCode: 501, code: 'SETTLEMENT_OFF' });
  });

  // Last: it stops this file's PostgreSQL.
  it('says 503 POSTGRES_UNAVAILABLE while PostgreSQL is down', async () => {
    const { url } = await app(uniquePrefix('catalog-pg-down'), true);
    // The instance migrates its database in the background after it starts: 503 until then.
    await waitUntil(
      'the orders page to answer',
      async () => (await admin(url, '/api/products/phone/orders')).status === 200,
    );
    await stack.pg.stop();
    const res = await admin(url, '/api/products/phone/orders');
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ statusCode: 503, code: 'POSTGRES_UNAVAILABLE' });
  }, 60_000);

  /** Every key of a product (SCAN of its hash tag), by name: its type and size, to tell that nothing changed. */
  async function productKeys(prefix: string, productId: string): Promise<Record<string, string>> {
    const found: string[] = [];
    let cursor = '0';
    do {
      const [next, page] = await client.scan(cursor, 'MATCH', `${prefix}{p:${productId}}:*`, 'COUNT', 1000);
      found.push(...page);
      cursor = next;
    } while (cursor !== '0');
    const described = await Promise.all(
      found.sort().map(async (key) => {
        const type = await client.type(key);
        const size =
          type === 'hash'
            ? await client.hlen(key)
            : type === 'stream'
              ? await client.xlen(key)
              : type === 'zset'
                ? await client.zcard(key)
                : // The fencing counter moves with every hold of the lock, a refused DELETE's too.
                  key.endsWith(':fence')
                  ? 'counter'
                  : await client.get(key);
        return [key, `${type} ${size}`] as const;
      }),
    );
    return Object.fromEntries(described);
  }
});

/** Each order's status, by order id in order. */
function statuses(items: Record<string, unknown>[]): Record<string, unknown> {
  return sorted(Object.fromEntries(items.map((o) => [o.orderId, o.status])));
}

function sorted(byId: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(byId).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
