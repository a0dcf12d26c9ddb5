import { Escrow } from '../src/orders/escrow';
import { KeyLayout } from '../src/redis/key-layout';
import type { RedisClient } from '../src/redis/create-client';
import { request } from './helpers/app';
import { uniquePrefix } from './helpers/redis';
import { bucketsOnOneRedis, usersOf } from './helpers/buckets-on-one-redis';

/**
 * Outside review 46b of 79e43f6 (a refusal confirmed by a second read that compares each
 * bucket's sale, reads it steady, and compares its unitsReturned; pinned() for returns to
 * one bucket). Each test fails on 79e43f6. Interleavings are forced, not raced, as in
 * test/buckets-review46.e2e-spec.ts: the app's own Escrow.read() is held for one call,
 * bucket by bucket (or its pipeline command by command), with the real routes in between.
 */
describe('review 46b: refusals from reads of the buckets', () => {
  const { redis, app, put, buy } = bucketsOnOneRedis();
  const cancel = (url: string, orderId: string) => request(url, 'POST', `/api/orders/${orderId}/cancel`);

  interface Turns {
    readonly order: number[];
    readonly between: Array<() => Promise<void>>;
  }
  const nothing = () => Promise.resolve();
  type Found = Awaited<ReturnType<Escrow['read']>>[number];

  function readInTurns(
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
   * A client whose next pipeline runs its commands one at a time and calls `after` once,
   * right after its GET (the stock): between the stock and the sale's epoch read after it.
   */
  function splitAfterGet(real: RedisClient, after: () => Promise<void>): RedisClient {
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
          for (const name of ['get', 'hget', 'hgetall'])
            builder[name] = (...args: unknown[]) => (calls.push([name, args]), builder);
          builder.exec = async () => {
            const out: [null, unknown][] = [];
            for (const [name, args] of calls) {
              out.push([
                null,
                await (target as unknown as Record<string, (...a: unknown[]) => unknown>)[name](...args),
              ]);
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
   * Old sale: two buckets of one unit, H (bucket 0, the buyer x's home) sold, K (bucket 1)
   * one unit. The first read of the buckets: H's pipeline reads its version, unitsReturned
   * ('0') and stock (0) of the old sale; then the admin restarts the sale (H 1, K 1) and k1
   * buys K's unit; then H's pipeline reads the new sale's epoch and its moves (no move in
   * either sale: the version '0' both times, steady). Then K (0, new sale). The second read:
   * K (0); then k1 cancels (K 1) and y buys H's unit; then H (0, unitsReturned '0', the new
   * epoch, the same version). Every bucket read 0 twice, each "of the new sale", but H's
   * first stock was of the old one: the product held a unit at every instant (K's before
   * the PUT, H's, then K's).
   */
  async function restartInsideOnePipeline(strategy: string, prefix: string, product: string) {
    const { url, app: nest } = await app(prefix, strategy);
    expect((await put(url, product, { stock: 2, buckets: 2, perUserLimit: 5 })).status).toBe(200);
    const [h1, x, y] = usersOf(0, 2, 3, 'h');
    const [k1] = usersOf(1, 2, 1, 'k');
    expect((await buy(url, product, h1)).status).toBe(201);
    const escrow = nest.get(Escrow);
    const inner = escrow as unknown as { redis: RedisClient };
    const real = inner.redis;
    const steps: string[] = [];
    let inK = '';
    let putting = false;
    const act = async (
      what: string,
      answer: Promise<{ status: number; body: Record<string, any> }>,
      status: number,
    ) => {
      const r = await answer;
      steps.push(`${what} ${r.status}`);
      expect(r.status).toBe(status);
      return r.body;
    };
    const split = splitAfterGet(real, async () => {
      inner.redis = real;
      putting = true;
      await act('PUT', put(url, product, { stock: 2, buckets: 2, perUserLimit: 5, discardOrders: true }), 200).finally(
        () => (putting = false),
      );
      inK = (await act('k1 buys K', buy(url, product, k1), 201)).orderId;
    });
    const reads = readInTurns(
      escrow,
      {
        1: {
          order: [0, 1],
          between: [
            async () => {
              inner.redis = split;
            },
            async () => {
              inner.redis = real;
            },
          ],
        },
        2: {
          order: [1, 0],
          between: [
            nothing,
            async () => {
              await act('cancel K', cancel(url, inK), 200);
              await act('y buys H', buy(url, product, y), 201);
            },
          ],
        },
      },
      () => putting,
    );
    const done = () => {
      inner.redis = real;
      expect(reads.calls()).toBeGreaterThanOrEqual(2);
      expect(steps).toEqual(['PUT 200', 'k1 buys K 201', 'cancel K 200', 'y buys H 201']);
    };
    return { url, escrow, x, done };
  }

  it.each(['atomic', 'fenced'])(
    "%s: no SOLD_OUT when the sale restarts inside one bucket's read, between its GET of the stock and its HGET of the epoch (the epoch compared is read after the stock)",
    async (strategy) => {
      const { url, x, done } = await restartInsideOnePipeline(strategy, uniquePrefix(`r46b-put-${strategy}`), 'kettle');
      const answer = await buy(url, 'kettle', x);
      done();
      expect(answer.body.code).toBeUndefined();
      expect(answer.status).toBe(201);
    },
  );

  it.each(['atomic', 'fenced'])(
    '%s: no SOLD_OUT from a sale whose buckets keep no unitsReturned (begun before the count was kept): a unit back to a bucket between its two reads is not seen',
    async (strategy) => {
      const prefix = uniquePrefix(`r46b-nocount-${strategy}`);
      const keys = new KeyLayout(prefix);
      const { url, app: nest } = await app(prefix, strategy);
      expect((await put(url, 'lamp', { stock: 4, buckets: 2, perUserLimit: 5 })).status).toBe(200);
      // The sale as a version before the count began it (order-outcome-6.lua counts nothing
      // for it, "and gets none part-way"; BucketRead.returned is null).
      const c = redis.client();
      for (const id of ['lamp', 'lamp~1'])
        await c.hdel(keys.product(id).meta, 'unitsReturned', 'ordersCancelled', 'ordersExpired');
      const [a1, a2, x, z] = usersOf(0, 2, 4, 'a');
      const [b1, y, w] = usersOf(1, 2, 3, 'b');
      const inA = [(await buy(url, 'lamp', a1)).body.orderId, (await buy(url, 'lamp', a2)).body.orderId];
      const inB = (await buy(url, 'lamp', b1)).body.orderId;
      const escrow = nest.get(Escrow);
      const steps: string[] = [];
      const act = (what: string, answer: Promise<{ status: number }>, status = 201) =>
        answer.then((r) => {
          steps.push(`${what} ${r.status}`);
          expect(r.status).toBe(status);
        });
      // As test/buckets-refusals.e2e-spec.ts: A read 0, a unit back to A and B's sold, B
      // read 0; then B's back and A's sold, A read 0, A's back and B's sold, B read 0. The
      // product held a unit at every instant, and holds one in A at the end.
      readInTurns(escrow, {
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
      const answer = await buy(url, 'lamp', x);
      expect(steps).toEqual([
        'cancel A 200',
        'y buys B 201',
        'cancel B 200',
        'z buys A 201',
        'cancel A 200',
        'w buys B 201',
      ]);
      expect(answer.body.code).toBeUndefined();
      expect(answer.status).toBe(201);
    },
  );

  it('a product sold out while units come back to both its buckets and are sold again is SOLD_OUT, not 503 BUCKETS_BUSY', async () => {
    const prefix = uniquePrefix('r46b-busy2');
    const { url, app: nest } = await app(prefix, 'atomic');
    // Two buckets of one unit, both sold: nothing left.
    expect((await put(url, 'fan', { stock: 2, buckets: 2, perUserLimit: 5 })).status).toBe(200);
    const [h1, x] = usersOf(0, 2, 2, 'h');
    const [k1] = usersOf(1, 2, 1, 'k');
    let inH = (await buy(url, 'fan', h1)).body.orderId as string;
    let inK = (await buy(url, 'fan', k1)).body.orderId as string;
    const escrow = nest.get(Escrow);
    const read = escrow.read.bind(escrow);
    // Before each read of the buckets (at most 200), the buyer of each bucket's unit
    // cancels and buys it again (expiries at the end of a hot sale, in every bucket, each
    // unit sold at once): every read finds both buckets dry, and the product is dry at
    // each of them (the same traffic as review 46's test, on two buckets instead of one).
    const steps = new Set<string>();
    let reads = 0;
    jest.spyOn(escrow, 'read').mockImplementation(async (buckets: readonly string[]) => {
      if (++reads <= 200) {
        steps.add(`cancel ${(await cancel(url, inH)).status}`);
        const h = await buy(url, 'fan', h1);
        steps.add(`buy ${h.status}`);
        inH = h.body.orderId;
        steps.add(`cancel ${(await cancel(url, inK)).status}`);
        const k = await buy(url, 'fan', k1);
        steps.add(`buy ${k.status}`);
        inK = k.body.orderId;
      }
      return read(buckets);
    });
    const answer = await buy(url, 'fan', x);
    expect([...steps]).toEqual(['cancel 200', 'buy 201']);
    expect({ code: answer.body.code, status: answer.status, reads }).toEqual({ code: 'SOLD_OUT', status: 409, reads });
  });

  it('an INSUFFICIENT_STOCK after returns to one bucket (pinned()) names a count the product held at some instant of the purchase', async () => {
    const prefix = uniquePrefix('r46b-pinned-count');
    const { url, app: nest } = await app(prefix, 'atomic');
    // H (bucket 0, the buyer x's home) 2 units, K (bucket 1) 2, sold to k1 (reserved): 2 in the product.
    expect((await put(url, 'lamp', { stock: 4, buckets: 2, perUserLimit: 5 })).status).toBe(200);
    const [x, h2] = usersOf(0, 2, 2, 'h');
    const [k1] = usersOf(1, 2, 1, 'k');
    let inK = (await buy(url, 'lamp', k1, 2)).body.orderId as string;
    const escrow = nest.get(Escrow);
    const steps: string[] = [];
    const cancelK = async () => {
      steps.push(`k1 cancels ${(await cancel(url, inK)).status}`);
    };
    const rebuyK = async () => {
      const again = await buy(url, 'lamp', k1, 2);
      steps.push(`k1 buys 2 ${again.status}`);
      inK = again.body.orderId;
    };
    // x asks 3. First read: H 2, K 0 (2 in the product). Before the second: k1 cancels (4)
    // and buys again (2): K's unitsReturned moved, so pinned() reads K alone (0: 2 in the
    // product), then k1 cancels (4) and h2 buys one of H's (3), then H (1). The product
    // held 2, 4, 2, 4, 3: never 1, and 3 when x is answered.
    readInTurns(escrow, {
      2: {
        order: [0, 1],
        between: [async () => (await cancelK(), await rebuyK()), nothing],
      },
      4: {
        order: [0],
        between: [
          async () => {
            await cancelK();
            steps.push(`h2 buys 1 ${(await buy(url, 'lamp', h2)).status}`);
          },
        ],
      },
    });
    const answer = await buy(url, 'lamp', x, 3);
    expect(steps).toEqual(['k1 cancels 200', 'k1 buys 2 201', 'k1 cancels 200', 'h2 buys 1 201']);
    expect(answer.status).toBe(409);
    const left = answer.body.code === 'SOLD_OUT' ? 0 : Number(/has (\d+) left/.exec(answer.body.message)?.[1]);
    expect({ code: answer.body.code, left, heldDuringPurchase: [2, 3, 4].includes(left) }).toEqual({
      code: answer.body.code,
      left,
      heldDuringPurchase: true,
    });
  });

  it("the waiting room's count (Escrow.left()) of a sale whose buckets keep no unitsReturned is not 0 while the product held a unit throughout", async () => {
    const prefix = uniquePrefix('r46b-nocount-left');
    const keys = new KeyLayout(prefix);
    const { url, app: nest } = await app(prefix, 'fenced');
    expect((await put(url, 'lamp', { stock: 4, buckets: 2, perUserLimit: 5 })).status).toBe(200);
    // The sale as a version before the count began it (BucketRead.returned is null).
    const c = redis.client();
    for (const id of ['lamp', 'lamp~1'])
      await c.hdel(keys.product(id).meta, 'unitsReturned', 'ordersCancelled', 'ordersExpired');
    const [a1, a2, z] = usersOf(0, 2, 3, 'a');
    const [b1, y, w] = usersOf(1, 2, 3, 'b');
    const inA = [(await buy(url, 'lamp', a1)).body.orderId, (await buy(url, 'lamp', a2)).body.orderId];
    const inB = (await buy(url, 'lamp', b1)).body.orderId;
    const escrow = nest.get(Escrow);
    const steps: string[] = [];
    const act = (what: string, answer: Promise<{ status: number }>, status = 201) =>
      answer.then((r) => {
        steps.push(`${what} ${r.status}`);
        expect(r.status).toBe(status);
      });
    // The same reads and returns as test/buckets-refusals.e2e-spec.ts's count of 1.
    readInTurns(escrow, {
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
    const left = await escrow.left('lamp', async () => (await c.hget(keys.product('lamp').meta, 'epoch')) ?? '');
    expect(steps).toHaveLength(6);
    // 0 is the door's SOLD_OUT to every join: the product held a unit throughout (1 in A now).
    expect(left).toEqual({ units: 1, moving: false });
  });
});
