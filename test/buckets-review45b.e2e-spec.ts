import { moveDone, moveDoneKeys, moveIn, moveInKeys, moveOut, moveOutKeys } from '../src/redis/lua-scripts';
import { KeyLayout } from '../src/redis/key-layout';
import { homeBucket } from '../src/sale/buckets';
import { Escrow } from '../src/orders/escrow';
import { request, startTestApp, TestApp } from './helpers/app';
import { uniquePrefix, useTestRedis } from './helpers/redis';

/** `count` user ids whose home bucket among `n` is `bucket`. */
function usersOf(bucket: number, n: number, count: number, stem = 'u'): string[] {
  const users: string[] = [];
  for (let i = 0; users.length < count; i++) if (homeBucket(`${stem}${i}`, n) === bucket) users.push(`${stem}${i}`);
  return users;
}

/**
 * Outside review 45b of fe2d865..b9dafa7 (bucket lists carried to the purchase, a
 * sale's epoch `<list>.<sale>`, refills that refuse only what a second read confirmed):
 * each test fails on b9dafa7.
 */
describe('review 45b: bucket lists and confirmed refills', () => {
  const redis = useTestRedis();
  const apps: TestApp[] = [];
  afterEach(async () => {
    jest.restoreAllMocks();
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });
  async function app(prefix: string, strategy = 'fenced'): Promise<TestApp> {
    const a = await startTestApp({ REDIS_URL: redis.url(), KEY_PREFIX: prefix, LOCK_STRATEGY: strategy });
    apps.push(a);
    return a;
  }
  const put = (url: string, id: string, json: Record<string, unknown>) =>
    request(url, 'PUT', `/api/products/${id}`, { json, admin: true });
  const buy = (url: string, productId: string, userId: string, quantity = 1, headers: Record<string, string> = {}) =>
    request(url, 'POST', '/api/orders', { json: { productId, userId, quantity }, headers });
  const ids = async (url: string, id: string): Promise<string[]> =>
    (await request(url, 'GET', `/api/products/${id}/buckets`, { admin: true })).body.map((b: { id: string }) => b.id);

  it('no INSUFFICIENT_STOCK from an unconfirmed short total: a refill whose move succeeded answers the total of one torn read', async () => {
    const prefix = uniquePrefix('r45b-short');
    const keys = new KeyLayout(prefix);
    const { url, app: nest } = await app(prefix, 'atomic');
    // 6 units, 2 in each bucket; the buyer (home bucket 1) asks for 5, which the product has.
    expect((await put(url, 'cam', { stock: 6, perUserLimit: 5, buckets: 3 })).status).toBe(200);
    const b = await ids(url, 'cam');
    const c = redis.client();
    const escrow = nest.get(Escrow);
    const read = escrow.read.bind(escrow);
    let reads = 0;
    // The refill's first read of three shards is three reads: bucket 0 read, then another
    // instance's refill moves bucket 2's two units whole to bucket 0 (the real move
    // scripts), then buckets 1 and 2 read. The read adds up to 4; 6 were there throughout.
    jest.spyOn(escrow, 'read').mockImplementation(async (buckets: readonly string[]) => {
      reads++;
      if (reads !== 1) return read(buckets);
      const first = await read(buckets.slice(0, 1));
      const [status, units, epoch] = await moveOut.run(c, moveOutKeys(keys.product(b[2])), 'other', b[0], 2, '');
      expect(status).toBe('OUT');
      const landing = await moveIn.run(c, moveInKeys(keys.product(b[0])), 'other', units, epoch as string);
      await moveDone.run(c, moveDoneKeys(keys.product(b[2])), 'other', landing);
      return [...first, ...(await read(buckets.slice(1)))];
    });
    const answer = await buy(url, 'cam', usersOf(1, 3, 1, 'k')[0], 5);
    expect(reads).toBeGreaterThanOrEqual(1);
    // Six units in the product all along (4 of them in bucket 1 after the refill's move):
    // the buyer's five are there.
    expect(answer.body.code).toBeUndefined();
    expect(answer.status).toBe(201);
  });
});
