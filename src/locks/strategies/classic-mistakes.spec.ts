import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { uniquePrefix, useTestRedis } from '../../../test/helpers/redis';
import { LockTimeoutError } from '../../errors/errors';
import type { LockFaults } from '../lock-faults';
import type { Lock } from '../lock';
import { ExpiryTimestampStrategy } from './expiry-timestamp.strategy';
import { GetThenDelStrategy } from './get-then-del.strategy';
import { SetNxLockStrategy } from './lock.strategy';
import { SetnxNoTtlStrategy } from './setnx-no-ttl.strategy';
import { SetnxThenExpireStrategy } from './setnx-then-expire.strategy';
import { UncheckedDelStrategy } from './unchecked-del.strategy';

/**
 * Each classic mistake, made to fail on purpose with a real Redis, and the failure
 * asserted: two holders inside at once, or a lock that never expires. Where the
 * correct `lock` survives the same scenario, that is asserted beside it.
 */
describe('classic mistakes fail as the literature says', () => {
  const { client, closing } = useTestRedis();
  let key: string;

  beforeEach(() => {
    key = `${uniquePrefix('mistake')}{p:x}:lock`;
  });

  /**
   * Three buyers, each on its own connection. The first holds the lock longer than
   * its TTL (or is paused in its release); the next two each hold it well within
   * their own TTL. Returns how many of those two were inside at the same moment,
   * counted in Redis: 2 means the lock let a buyer in beside a valid holder.
   */
  async function overlapAfterFirstHolderOverstays(make: (c: Redis) => Lock, firstHoldMs: number): Promise<number> {
    const counter = client();
    const inside = `${key}:valid-holders`;
    let entered = 0;
    let maxInside = 0;
    const buyer = (lock: Lock) =>
      lock.using(key, async () => {
        if (entered++ === 0) {
          await sleep(firstHoldMs);
          return;
        }
        maxInside = Math.max(maxInside, await counter.incr(inside));
        await sleep(450); // well within the 500 ms TTL the scenarios use
        await counter.decr(inside);
      });
    const first = buyer(make(client()));
    await sleep(20); // the first buyer holds the lock
    await Promise.all([first, buyer(make(client())), buyer(make(client()))]);
    expect(entered).toBe(3);
    return maxInside;
  }

  describe('setnx-no-ttl', () => {
    it('a holder that dies leaves the product locked forever', async () => {
      const dying = client();
      const lock = new SetnxNoTtlStrategy(dying, { ttlMs: 200, waitMs: 0 });
      expect(await lock.tryAcquire(key)).not.toBeNull();
      dying.disconnect(); // crashed before DEL

      const observer = client();
      expect(await observer.pttl(key)).toBe(-1); // no expiry at all
      const other = new SetnxNoTtlStrategy(client(), { ttlMs: 200, waitMs: 400 });
      await expect(other.using(key, async () => 'bought')).rejects.toBeInstanceOf(LockTimeoutError);
      // Well past the TTL it was configured with, the lock is still there.
      expect(await observer.exists(key)).toBe(1);
      expect(await observer.pttl(key)).toBe(-1);
    });
  });

  describe('setnx-then-expire', () => {
    it('sets a TTL when nothing goes wrong', async () => {
      const c = client();
      const lock = new SetnxThenExpireStrategy(c, { ttlMs: 5_000, waitMs: 0 });
      expect(await lock.tryAcquire(key)).not.toBeNull();
      expect(await c.pttl(key)).toBeGreaterThan(0);
    });

    it('a crash between SETNX and EXPIRE leaves a lock with no TTL', async () => {
      const c = client();
      const crash: LockFaults = {
        at: (step) => {
          if (step === 'after-setnx') throw new Error('process crashed after SETNX');
        },
      };
      const lock = new SetnxThenExpireStrategy(c, { ttlMs: 200, waitMs: 0, faults: crash });
      await expect(lock.using(key, async () => 'bought')).rejects.toThrow('crashed after SETNX');
      expect(await c.exists(key)).toBe(1);
      expect(await c.pttl(key)).toBe(-1);
      await sleep(300);
      expect(await c.exists(key)).toBe(1); // never expires
    });

    it('the correct lock cannot be left without a TTL: SET NX PX is one command', async () => {
      const c = client();
      await closing(new SetNxLockStrategy(c, { ttlMs: 5_000, waitMs: 0 })).tryAcquire(key);
      expect(await c.pttl(key)).toBeGreaterThan(0);
    });
  });

  describe('unchecked-del', () => {
    it('a holder that outlived its TTL deletes the next holder’s lock: two holders inside', async () => {
      const overlap = await overlapAfterFirstHolderOverstays(
        (c) => new UncheckedDelStrategy(c, { ttlMs: 500, waitMs: 5_000 }),
        800,
      );
      expect(overlap).toBe(2);
    });

    it('the correct lock in the same scenario never has two valid holders', async () => {
      const overlap = await overlapAfterFirstHolderOverstays(
        (c) => closing(new SetNxLockStrategy(c, { ttlMs: 500, waitMs: 5_000 })),
        800,
      );
      expect(overlap).toBe(1);
    });
  });

  describe('get-then-del', () => {
    it('a pause between GET and DEL deletes the next holder’s lock: two holders inside', async () => {
      let paused = false;
      const pauseOnce: LockFaults = {
        at: async (step) => {
          if (step !== 'release:after-get' || paused) return;
          paused = true;
          await sleep(700); // GC pause: the lock expires and is taken meanwhile
        },
      };
      const overlap = await overlapAfterFirstHolderOverstays(
        (c) => new GetThenDelStrategy(c, { ttlMs: 500, waitMs: 5_000, faults: pauseOnce }),
        50,
      );
      expect(paused).toBe(true);
      expect(overlap).toBe(2);
    });
  });

  describe('expiry-timestamp', () => {
    it('a client whose clock runs ahead steals a live lock: two holders inside', async () => {
      const counter = client();
      const inside = `${key}:holders`;
      let maxInside = 0;
      const section = async () => {
        maxInside = Math.max(maxInside, await counter.incr(inside));
        await sleep(200);
        await counter.decr(inside);
      };
      const honest = new ExpiryTimestampStrategy(client(), { ttlMs: 5_000, waitMs: 1_000 });
      const skewed = new ExpiryTimestampStrategy(client(), {
        ttlMs: 5_000,
        waitMs: 1_000,
        faults: { now: () => Date.now() + 60_000 }, // one minute ahead
      });
      const first = honest.using(key, section);
      await sleep(50);
      await Promise.all([first, skewed.using(key, section)]);
      expect(maxInside).toBe(2);
    });

    it('with agreeing clocks it excludes', async () => {
      const counter = client();
      const inside = `${key}:holders`;
      let maxInside = 0;
      const locks = [0, 1, 2].map(() => new ExpiryTimestampStrategy(client(), { ttlMs: 5_000, waitMs: 5_000 }));
      await Promise.all(
        locks.map((lock) =>
          lock.using(key, async () => {
            maxInside = Math.max(maxInside, await counter.incr(inside));
            await sleep(30);
            await counter.decr(inside);
          }),
        ),
      );
      expect(maxInside).toBe(1);
    });
  });
});
