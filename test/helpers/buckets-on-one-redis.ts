import { homeBucket } from '../../src/sale/buckets';
import { request, startTestApp, TestApp } from './app';
import { useTestRedis } from './redis';

/** `count` user ids whose home bucket among `n` is `bucket` (homeBucket()), named `<stem><i>`. */
export function usersOf(bucket: number, n: number, count: number, stem = 'u'): string[] {
  const users: string[] = [];
  for (let i = 0; users.length < count; i++) if (homeBucket(`${stem}${i}`, n) === bucket) users.push(`${stem}${i}`);
  return users;
}

/**
 * What the tests of escrow buckets on one Redis share, called in their describe: the
 * server (useTestRedis), apps under a strategy, closed after each test with every mock
 * restored, and the routes they call.
 */
export function bucketsOnOneRedis() {
  const redis = useTestRedis();
  const apps: TestApp[] = [];
  afterEach(async () => {
    jest.restoreAllMocks();
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });
  return {
    redis,
    app: async (prefix: string, strategy = 'fenced', env: Record<string, string> = {}): Promise<TestApp> => {
      const a = await startTestApp({ REDIS_URL: redis.url(), KEY_PREFIX: prefix, LOCK_STRATEGY: strategy, ...env });
      apps.push(a);
      return a;
    },
    put: (url: string, id: string, json: Record<string, unknown>) =>
      request(url, 'PUT', `/api/products/${id}`, { json, admin: true }),
    buy: (url: string, productId: string, userId: string, quantity = 1, headers: Record<string, string> = {}) =>
      request(url, 'POST', '/api/orders', { json: { productId, userId, quantity }, headers }),
    /** The product's bucket ids, bucket 0 first (GET /api/products/:id/buckets). */
    ids: async (url: string, id: string): Promise<string[]> =>
      (await request(url, 'GET', `/api/products/${id}/buckets`, { admin: true })).body.map((b: { id: string }) => b.id),
  };
}
