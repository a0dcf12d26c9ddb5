import type { Escrow } from '../../src/orders/escrow';
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

/** How one call of Escrow.read() reads: bucket `order[i]` after `between[i]` ran. */
export interface Turns {
  readonly order: number[];
  readonly between: Array<() => Promise<void>>;
}

/** A step of Turns that does nothing. */
export const nothing = () => Promise.resolve();

type Found = Awaited<ReturnType<Escrow['read']>>[number];

/**
 * The app's own Escrow.read(), its calls numbered in `turns` (from 1) made bucket by
 * bucket, in the order a turn gives (one Promise.all allows), with its steps run between
 * the reads; the other calls as they are. While `paused()` says so (a PUT's own read of
 * the buckets, say), a call is not counted.
 */
export function readInTurns(
  escrow: Escrow,
  turns: Record<number, Turns>,
  paused: () => boolean = () => false,
): { calls: () => number } {
  const read = escrow.read.bind(escrow);
  let calls = 0;
  jest.spyOn(escrow, 'read').mockImplementation(async (buckets: readonly string[]) => {
    if (paused()) return read(buckets);
    const turn = turns[++calls];
    if (!turn) return read(buckets);
    const found = new Array<Found>(buckets.length);
    for (const [i, bucket] of turn.order.entries()) {
      await turn.between[i]();
      [found[bucket]] = await read([buckets[bucket]]);
    }
    return found;
  });
  return { calls: () => calls };
}

/**
 * Before each of the app's first `most` calls of Escrow.read(), `step` runs (a buyer's
 * cancel and purchase again, say: units that come back and sell at once). Returns how
 * many calls were made.
 */
export function beforeEachRead(escrow: Escrow, most: number, step: () => Promise<void>): { calls: () => number } {
  const read = escrow.read.bind(escrow);
  let calls = 0;
  jest.spyOn(escrow, 'read').mockImplementation(async (buckets: readonly string[]) => {
    if (++calls <= most) await step();
    return read(buckets);
  });
  return { calls: () => calls };
}
