import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { PrivatePostgres, startPrivatePostgres } from '../harness/postgres';
import { KeyLayout } from '../src/redis/key-layout';
import { pay, request, startTestApp, TestApp } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

/**
 * The admin's view of the catalog and its orders: GET /api/products pages the products
 * set with SSCAN (never the whole set in one reply), GET /api/products/:id/orders pages
 * PostgreSQL's orders by order id. Real redis-server and PostgreSQL processes.
 */
describe('the catalog and its orders, for an admin', () => {
  let redis: TestRedis;
  let pg: PrivatePostgres;
  let client: Redis;
  let databases = 0;
  const open: TestApp[] = [];

  beforeAll(async () => {
    [redis, pg] = await Promise.all([startTestRedis(), startPrivatePostgres()]);
    client = new Redis(redis.url);
  }, 60_000);

  afterEach(async () => {
    await Promise.all(open.splice(0).map((a) => a.close()));
  });

  afterAll(async () => {
    await closeClient(client);
    await Promise.all([redis?.stop(), pg?.remove()]);
  });

  async function app(prefix: string, settles: boolean): Promise<TestApp> {
    const env: Record<string, string> = { REDIS_URL: redis.url, KEY_PREFIX: prefix };
    if (settles) env.DATABASE_URL = await pg.createDatabase(`catalog_test_${process.pid}_${++databases}`);
    const a = await startTestApp(env);
    open.push(a);
    return a;
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
  ])('refuses %s with 400 VALIDATION_FAILED', async (path) => {
    const { url } = await app(uniquePrefix('catalog-bad'), true);
    const res = await admin(url, path);
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

  it('says 501 SETTLEMENT_OFF where the instance does not settle (no DATABASE_URL)', async () => {
    const { url } = await app(uniquePrefix('catalog-off'), false);
    const res = await admin(url, '/api/products/phone/orders');
    expect(res.status).toBe(501);
    expect(res.body).toMatchObject({ statusCode: 501, code: 'SETTLEMENT_OFF' });
  });

  // Last: it stops this file's PostgreSQL.
  it('says 503 POSTGRES_UNAVAILABLE while PostgreSQL is down', async () => {
    const { url } = await app(uniquePrefix('catalog-pg-down'), true);
    expect((await admin(url, '/api/products/phone/orders')).status).toBe(200);
    await pg.stop();
    const res = await admin(url, '/api/products/phone/orders');
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ statusCode: 503, code: 'POSTGRES_UNAVAILABLE' });
  }, 60_000);
});

/** Each order's status, by order id in order. */
function statuses(items: Record<string, unknown>[]): Record<string, unknown> {
  return sorted(Object.fromEntries(items.map((o) => [o.orderId, o.status])));
}

function sorted(byId: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(byId).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
