import { Escrow as EscrowClass } from '../../src/orders/escrow';
type Escrow = EscrowClass;
import type { RedisClient } from '../../src/redis/create-client';
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
  const start = async (prefix: string, strategy = 'fenced', env: Record<string, string> = {}): Promise<TestApp> => {
    const a = await startTestApp({ REDIS_URL: redis.url(), KEY_PREFIX: prefix, LOCK_STRATEGY: strategy, ...env });
    apps.push(a);
    return a;
  };
  const put = (url: string, id: string, json: Record<string, unknown>) =>
    request(url, 'PUT', `/api/products/${id}`, { json, admin: true });
  const buy = (url: string, productId: string, userId: string, quantity = 1, headers: Record<string, string> = {}) =>
    request(url, 'POST', '/api/orders', { json: { productId, userId, quantity }, headers });
  const cancel = (url: string, orderId: string) => request(url, 'POST', `/api/orders/${orderId}/cancel`);
  return {
    redis,
    app: start,
    put,
    buy,
    /** The product's bucket ids, bucket 0 first (GET /api/products/:id/buckets). */
    ids: async (url: string, id: string): Promise<string[]> =>
      (await request(url, 'GET', `/api/products/${id}/buckets`, { admin: true })).body.map((b: { id: string }) => b.id),
    cancel,
    /**
     * Product `fan` under `strategy`: two buckets of one unit, both sold (to h, home bucket
     * 0, and k, home bucket 1): nothing left. Then, before each of the app's first `most`
     * calls of Escrow.read(), the buyer of each bucket in `churning` (0, 1) cancels and
     * buys again (an order that expires on a hot product, its unit sold at once): the
     * product is dry at every read. Returns a buyer x (home bucket 0) who has bought
     * nothing, the app's Escrow, what the steps answered (each kind once) and the reads.
     */
    soldOutWhileReturning: async (prefix: string, strategy: string, churning: number[], most: number) => {
      const { url, app: nest } = await start(prefix, strategy);
      expect((await put(url, 'fan', { stock: 2, buckets: 2, perUserLimit: 5 })).status).toBe(200);
      const [h, x] = usersOf(0, 2, 2, 'h');
      const [k] = usersOf(1, 2, 1, 'k');
      const buyers = [h, k];
      const held = [
        (await buy(url, 'fan', h)).body.orderId as string,
        (await buy(url, 'fan', k)).body.orderId as string,
      ];
      const steps = new Set<string>();
      const escrow = nest.get(EscrowClass);
      const reads = beforeEachRead(escrow, most, async () => {
        for (const i of churning) {
          steps.add(`cancel ${(await cancel(url, held[i])).status}`);
          const again = await buy(url, 'fan', buyers[i]);
          steps.add(`buy ${again.status}`);
          held[i] = again.body.orderId;
        }
      });
      return { url, x, escrow, steps: () => [...steps], reads };
    },
    /**
     * Product `lamp`: two buckets of two units, bucket 0 (A) sold out by two of its
     * buyers, bucket 1 (B) left with one unit; `prepare` runs on the app once the sale is
     * put (before any purchase). Then Escrow.read()'s first two calls read A, then B, and
     * between the reads units come back and sell: the first read finds A at 0, then A
     * gets one back and B's unit is sold (y), then it finds B at 0. The second read finds
     * A at 0 after a unit came back to B and A's was sold (z), then B at 0 after a unit
     * came back to A and B's was sold (w). Every bucket read 0 twice, but the product held
     * a unit at every instant, and holds one in A at the end. Returns the product's buyer
     * x (home A), and `done`, which asserts what happened between the reads.
     */
    returnsBetweenReads: async (
      strategy: string,
      prefix: string,
      prepare: () => Promise<void> = nothing,
    ): Promise<{ url: string; escrow: Escrow; x: string; done: () => void }> => {
      const a = await start(prefix, strategy);
      const url = a.url;
      expect((await put(url, 'lamp', { stock: 4, buckets: 2, perUserLimit: 5 })).status).toBe(200);
      await prepare();
      const [a1, a2, x, z] = usersOf(0, 2, 4, 'a');
      const [b1, y, w] = usersOf(1, 2, 3, 'b');
      const inA = [(await buy(url, 'lamp', a1)).body.orderId, (await buy(url, 'lamp', a2)).body.orderId];
      const inB = (await buy(url, 'lamp', b1)).body.orderId;
      const escrow = a.app.get(EscrowClass);
      const steps: string[] = [];
      const act = (what: string, answer: Promise<{ status: number }>, status = 201) =>
        answer.then((r) => {
          steps.push(`${what} ${r.status}`);
          expect(r.status).toBe(status);
        });
      const reads = readInTurns(escrow, {
        1: {
          order: [0, 1],
          between: [
            nothing,
            () => act('cancel A', cancel(url, inA[0]), 200).then(() => act('y buys B', buy(url, 'lamp', y))),
          ],
        },
        2: {
          order: [0, 1],
          between: [
            () => act('cancel B', cancel(url, inB), 200).then(() => act('z buys A', buy(url, 'lamp', z))),
            () => act('cancel A', cancel(url, inA[1]), 200).then(() => act('w buys B', buy(url, 'lamp', w))),
          ],
        },
      });
      const done = () => {
        expect(reads.calls()).toBeGreaterThanOrEqual(2);
        expect(steps).toEqual([
          'cancel A 200',
          'y buys B 201',
          'cancel B 200',
          'z buys A 201',
          'cancel A 200',
          'w buys B 201',
        ]);
      };
      return { url, escrow, x, done };
    },
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

/**
 * A client whose pipelines run their commands one at a time, and `after` once, right after
 * the first GET (a bucket's stock in Escrow.read(): between the reads before its stock and
 * those after). Set as the app's Escrow client for one read, it forces what a pipeline,
 * not atomic, allows: another client's commands between two of its commands.
 */
export function splitAfterGet(real: RedisClient, after: () => Promise<void>): RedisClient {
  let fired = false;
  return new Proxy(real, {
    get(target, prop) {
      if (prop !== 'pipeline') {
        const value = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return () => {
        const calls: [string, unknown[]][] = [];
        const builder: Record<string, unknown> = {};
        for (const name of ['get', 'hget', 'hmget', 'hgetall'])
          builder[name] = (...args: unknown[]) => (calls.push([name, args]), builder);
        builder.exec = async () => {
          const out: [null, unknown][] = [];
          for (const [name, args] of calls) {
            out.push([null, await (target as unknown as Record<string, (...a: unknown[]) => unknown>)[name](...args)]);
            if (name === 'get' && !fired) {
              fired = true;
              await after();
            }
          }
          return out;
        };
        return builder;
      };
    },
  });
}

/**
 * Escrow.read()'s first call reads bucket 0 (H) through a pipeline split after its GET of
 * the stock (splitAfterGet(): `inside` runs there, the app's own client back in place for
 * it), then bucket 1 (K); its second call reads K, then `between` runs, then H. The other
 * calls, and those while `paused()` says so, as they are. `restore()` puts the app's
 * client back, whatever happened.
 */
export function splitFirstRead(
  escrow: Escrow,
  inside: () => Promise<void>,
  between: () => Promise<void>,
  paused?: () => boolean,
): { calls: () => number; restore: () => void } {
  const inner = escrow as unknown as { redis: RedisClient };
  const real = inner.redis;
  const restore = () => void (inner.redis = real);
  const split = splitAfterGet(real, async () => {
    restore();
    await inside();
  });
  const reads = readInTurns(
    escrow,
    {
      1: { order: [0, 1], between: [async () => void (inner.redis = split), async () => restore()] },
      2: { order: [1, 0], between: [nothing, between] },
    },
    paused,
  );
  return { calls: reads.calls, restore };
}
