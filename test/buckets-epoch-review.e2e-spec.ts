import type { Redis } from 'ioredis';
import { KeyLayout } from '../src/redis/key-layout';
import { REDIS_CLIENT } from '../src/redis/redis.constants';
import { resetSale } from '../src/redis/lua-scripts';
import { ProductsService } from '../src/products/products.service';
import { Escrow } from '../src/orders/escrow';
import { PurchasePath } from '../src/orders/purchases/purchase-path';
import { TestApp } from './helpers/app';
import { uniquePrefix } from './helpers/redis';
import { bucketsOnOneRedis, usersOf } from './helpers/buckets-on-one-redis';

/**
 * Outside review of 34b3a88 (a purchase carries its bucket list's epoch to where it
 * decides): what it refuses or costs that the code before it answered correctly.
 */
describe('review 45: the sale epoch a purchase carries', () => {
  const { redis, app, put, buy } = bucketsOnOneRedis();

  /** Counts the app's Escrow.home() calls (each not from the 1 s cache is a Redis round trip). */
  function countHomes(a: TestApp): { fresh: number; all: number } {
    const escrow = a.app.get(Escrow);
    const original = escrow.home.bind(escrow);
    const counts = { fresh: 0, all: 0 };
    jest.spyOn(escrow, 'home').mockImplementation((productId: string, userId: string, fresh?: boolean) => {
      counts.all++;
      if (fresh) counts.fresh++;
      return original(productId, userId, fresh);
    });
    return counts;
  }

  it.each(['atomic', 'optimistic', 'fenced', 'lock', 'reentrant'])(
    '%s: a restart (PUT, no DELETE) of a 3-bucket sale, bucket 0 not reset yet: a buyer of bucket 1 buys in the new sale, as before',
    async (strategy) => {
      const prefix = uniquePrefix(`r45b-reset-${strategy}`);
      const keys = new KeyLayout(prefix);
      const a = await app(prefix, strategy);
      expect((await put(a.url, 'tv', { stock: 9, buckets: 3 })).status).toBe(200);
      const [y] = usersOf(1, 3, 1, 'y');
      // The PUT's reset of bucket 0 (the last, whose meta lists the buckets and carries the
      // epoch a list reads) is held, as a slow link or a pause would hold it: buckets 2 and 1
      // already sell the new sale. Under atomic and optimistic nothing excludes a purchase;
      // under the locks the buyer's unlocked pre-read (sent while the PUT holds the lock)
      // refuses it BUCKETS_BUSY 'changed', and checkout tries again 15 times at once.
      const bucket0 = keys.product('tv').meta;
      const original = resetSale.run.bind(resetSale);
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let reached!: () => void;
      const atBucket0 = new Promise<void>((r) => (reached = r));
      jest.spyOn(resetSale, 'run').mockImplementation(async (client, k, ...args) => {
        if (k[0] === bucket0 && args[args.length - 1] === '0') {
          reached();
          await gate;
        }
        return original(client, k, ...args);
      });
      const restart = a.app.get(ProductsService).startSale('tv', 9, 1, { discardOrders: true });
      try {
        await atBucket0;
        // Under a lock the PUT holds every bucket's lock: a purchase that goes on to wait for
        // it (as before 34b3a88) lets the PUT finish then, and buys once it is released.
        const lock = (a.app.get(PurchasePath) as unknown as { lock?: { using: (...args: unknown[]) => unknown } }).lock;
        if (lock) {
          const using = lock.using.bind(lock);
          jest.spyOn(lock, 'using').mockImplementation((...args: unknown[]) => {
            release();
            return using(...args);
          });
        }
        const homes = countHomes(a);
        const answer = await buy(a.url, 'tv', y);
        // Before 34b3a88: 201 in bucket 1 of the new sale (the bucket the new list homes y in too).
        expect({ status: answer.status, code: answer.body.code, listReadsAtMost1: homes.fresh <= 1 }).toEqual({
          status: 201,
          code: undefined,
          listReadsAtMost1: true,
        });
      } finally {
        release();
        await restart;
      }
      // And the count is where y's next purchase looks: LIMIT_REACHED.
      expect((await buy(a.url, 'tv', y)).body.code).toBe('LIMIT_REACHED');
    },
  );

  it("atomic: a bucket whose epoch is not bucket 0's (a PUT crashed half-way): one purchase reads the list again at most once (not 15 times, a script each)", async () => {
    const prefix = uniquePrefix('r45b-crash');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix, 'atomic');
    expect((await put(a.url, 'tv', { stock: 9, buckets: 3 })).status).toBe(200);
    // What a PUT that reset bucket 1 and then crashed leaves: bucket 1 in a sale bucket 0 does not name.
    await redis.client().hset(keys.product('tv~1').meta, 'epoch', 'the-next-sale');
    const [y] = usersOf(1, 3, 1, 'y');
    const homes = countHomes(a);
    const c = a.app.get<Redis>(REDIS_CLIENT);
    const evalsha = jest.spyOn(c, 'evalsha');
    const answer = await buy(a.url, 'tv', y);
    // A fresh list with the same epoch as the refused one cannot succeed: each retry is
    // a list read and a purchase script more, 32 round trips for one request, every request.
    // (Answered 201 in the sale bucket 1 is in, as before 34b3a88, or 503 at once: either way not 16 tries.)
    expect({
      answer: answer.status === 201 ? 201 : answer.body.code,
      listReadsAtMost1: homes.fresh <= 1,
      scriptsAtMost2: evalsha.mock.calls.length <= 2,
      fresh: homes.fresh,
      scripts: evalsha.mock.calls.length,
    }).toEqual({
      answer: answer.status === 201 ? 201 : 'BUCKETS_BUSY',
      listReadsAtMost1: true,
      scriptsAtMost2: true,
      fresh: homes.fresh,
      scripts: evalsha.mock.calls.length,
    });
  });

  it('one bucket: a purchase of an unknown product costs one list read, as before (no fresh re-read per UNKNOWN_PRODUCT)', async () => {
    const prefix = uniquePrefix('r45b-ghost');
    const a = await app(prefix, 'atomic');
    const c = a.app.get<Redis>(REDIS_CLIENT);
    const hmget = jest.spyOn(c, 'hmget');
    const first = await buy(a.url, 'ghost', 'u1');
    expect(first.body.code).toBe('UNKNOWN_PRODUCT');
    // The door does not learn UNKNOWN_PRODUCT: every purchase of a retired id comes this way.
    expect(hmget.mock.calls.length).toBe(1);
  });
});
