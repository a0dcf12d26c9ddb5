import { Redis } from 'ioredis';
import { KeyLayout } from '../src/redis/key-layout';
import { request, startSale, startTestApp, TestApp } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

/**
 * A rolling deploy between strategies puts two LOCK_STRATEGY values on one Redis and
 * one key prefix. Strategies of one family exclude each other (`lock` and `fenced`
 * take the same lock); across families nothing excludes (an `atomic` script does not
 * wait for a `lock` holder), so the family that started a sale sells it, and the
 * others refuse it with 503 STRATEGY_MISMATCH, writing nothing, and name it in /health.
 */
describe('strategy families on one Redis: the family that started a sale sells it', () => {
  let redis: TestRedis;
  let client: Redis;
  const apps: TestApp[] = [];
  let prefix: string;
  let keys: KeyLayout;

  beforeAll(async () => {
    redis = await startTestRedis();
    client = new Redis(redis.url);
  });

  beforeEach(() => {
    prefix = uniquePrefix('families');
    keys = new KeyLayout(prefix);
  });

  afterEach(async () => {
    while (apps.length > 0) await apps.pop()!.close();
  });

  afterAll(async () => {
    await closeClient(client);
    await redis?.stop();
  });

  async function app(strategy: string): Promise<TestApp> {
    const started = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: prefix, LOCK_STRATEGY: strategy });
    apps.push(started);
    return started;
  }

  const buy = (a: TestApp, productId: string, userId: string) =>
    request(a.url, 'POST', '/api/orders', { json: { productId, userId } });

  it.each([
    ['atomic', 'lock'],
    ['lock', 'atomic'],
    ['fenced', 'optimistic'],
    ['lock', 'reentrant'],
    ['fenced', 'reentrant'],
  ])(
    'a sale started under %s: an instance running %s refuses it, writes nothing, says so in /health',
    async (first, second) => {
      const [a, b] = [await app(first), await app(second)];
      await startSale(a.url, 'phone', 3);
      const k = keys.product('phone');
      expect(await client.hget(k.meta, 'soldBy')).toBe(
        { lock: 'lock', fenced: 'lock', atomic: 'lock-free', optimistic: 'lock-free' }[first] ?? first,
      );
      const refused = await buy(b, 'phone', 'bob');
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({ code: 'STRATEGY_MISMATCH' });
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(await client.get(k.stock)).toBe('3');
      expect(await client.xlen(k.orders)).toBe(0);
      const health = await request(b.url, 'GET', '/health');
      expect(health.status).toBe(200);
      expect(health.body).toMatchObject({ strategyMismatch: ['phone'] });
      // The family that started it sells it.
      expect((await buy(a, 'phone', 'ann')).status).toBe(201);
      // The other family restarts it only when told to take it over (its reset cannot
      // exclude this family's buyers): then the sale is the other family's.
      const put = (json: Record<string, unknown>) =>
        request(b.url, 'PUT', '/api/products/phone', {
          json: { stock: 3, discardOrders: true, ...json },
          admin: true,
        });
      const refusedPut = await put({});
      expect(refusedPut.status).toBe(503);
      expect(refusedPut.body).toMatchObject({ code: 'STRATEGY_MISMATCH' });
      expect(await client.get(k.stock)).toBe('2');
      expect((await put({ switchStrategy: true })).status).toBe(200);
      expect((await buy(b, 'phone', 'bob')).status).toBe(201);
      expect((await buy(a, 'phone', 'ann')).body).toMatchObject({ code: 'STRATEGY_MISMATCH' });
      // Nor does the first family delete it (its hold would not exclude the other's buyers) unless told to.
      const remove = (query: string) => request(a.url, 'DELETE', `/api/products/phone${query}`, { admin: true });
      const refusedDelete = await remove('?discardOrders=true');
      expect(refusedDelete.status).toBe(503);
      expect(refusedDelete.body).toMatchObject({ code: 'STRATEGY_MISMATCH' });
      expect(await client.get(k.stock)).toBe('2');
      expect((await remove('?discardOrders=true&switchStrategy=true')).body).toMatchObject({ discardedOrders: 1 });
      expect(await client.exists(k.meta, k.stock, k.orders)).toBe(0);
    },
  );

  it.each([
    ['lock', 'fenced'],
    ['fenced', 'lock'],
    ['atomic', 'optimistic'],
  ])('%s and %s are one family: both sell one sale, to its stock and no further', async (first, second) => {
    const [a, b] = [await app(first), await app(second)];
    await startSale(a.url, 'phone', 10);
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => buy(i % 2 === 0 ? a : b, 'phone', `u${i}`)));
    expect(answers.filter((r) => r.status === 201)).toHaveLength(10);
    expect(answers.every((r) => r.status === 201 || r.status === 409)).toBe(true);
    const k = keys.product('phone');
    expect(await client.get(k.stock)).toBe('0');
    expect(await client.xlen(k.orders)).toBe(10);
  });
});
