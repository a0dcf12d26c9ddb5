import { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { startSaleIn, useTestRedis } from '../../test/helpers/redis';
import { LockBypassedError, StaleLockError, StrategyMismatchError } from '../errors/errors';
import { FencedLockStrategy } from '../locks/strategies/fenced.strategy';
import { SetNxLockStrategy } from '../locks/strategies/lock.strategy';
import { writeOrders } from './sale-store';

/** The write side of fencing: an order written under a fenced hold, and the fence refusing a paused holder. */
describe('writeOrders under a fenced hold, against a real Redis', () => {
  const { client, closing } = useTestRedis();

  async function product(stock: number) {
    const redis = client();
    return { redis, ...(await startSaleIn(redis, stock, 5, 'fenced')) };
  }

  it('hands the section its token, and the written order carries it', async () => {
    const { redis, k } = await product(2);
    const lock = closing(new FencedLockStrategy(redis, { ttlMs: 5_000, waitMs: 1_000 }));
    const left = await lock.using(k.lock, ({ fence }) => {
      expect(fence).toBe(1);
      return writeOrders(
        redis,
        k,
        'lock',
        [{ order: { productId: 'phone', userId: 'ann', quantity: 1 }, orderId: 'o1', remaining: 1 }],
        fence,
      );
    });
    expect(left).toEqual([1]);
    const [[, fields]] = await redis.xrange(k.orders, '-', '+');
    expect(fields).toEqual(['orderId', 'o1', 'userId', 'ann', 'quantity', '1', 'fence', '1']);
    expect(await redis.hget(k.meta, 'fence')).toBe('1'); // the last token applied
  });

  /**
   * The pause that no client-side check catches: holder A reads the last unit, then
   * stalls past its TTL *after* its validity check (a GC pause, SIGSTOP); B takes
   * the lock, reads the same unit and sells it; A wakes and writes.
   */
  async function pausedHolder(strategy: 'lock' | 'fenced') {
    const { redis, k } = await product(1);
    const make = (ttlMs: number) =>
      strategy === 'fenced'
        ? closing(new FencedLockStrategy(client(), { ttlMs, waitMs: 2_000 }))
        : closing(new SetNxLockStrategy(client(), { ttlMs, waitMs: 2_000 }));
    const a = make(150);
    const b = make(5_000);
    const buy = (userId: string) => ({
      order: { productId: 'phone', userId, quantity: 1 },
      orderId: `order-${userId}`,
      remaining: 0,
    });
    let bDone!: () => void;
    const bFinished = new Promise<void>((resolve) => (bDone = resolve));
    const aResult = a
      .using(k.lock, async ({ signal, fence }) => {
        expect(await redis.get(k.stock)).toBe('1');
        signal.throwIfAborted(); // still valid here...
        await bFinished; // ...then the pause: B acquires after our TTL and sells
        return writeOrders(redis, k, 'lock', [buy('a')], fence);
      })
      .then(
        (left) => ({ wrote: left }),
        (err: Error) => ({ refused: err }),
      );
    await sleep(200); // past A's TTL: the lock is free in Redis
    const bLeft = await b.using(k.lock, async ({ fence }) => {
      expect(await redis.get(k.stock)).toBe('1');
      return writeOrders(redis, k, 'lock', [buy('b')], fence);
    });
    bDone();
    return {
      a: await aResult,
      bLeft,
      stock: await redis.get(k.stock),
      orders: await redis.xlen(k.orders),
      lostLocks: a.lostLocks,
    };
  }

  it('refuses the paused holder’s late write with STALE_LOCK and changes nothing: no oversell', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn');
    try {
      const run = await pausedHolder('fenced');
      expect(run.bLeft).toEqual([0]);
      expect('refused' in run.a && run.a.refused).toBeInstanceOf(StaleLockError);
      expect(run.stock).toBe('0');
      expect(run.orders).toBe(1);
      // One lost hold, one line: the refused write and the release that found the lock
      // gone are the same loss.
      expect(run.lostLocks).toBe(1);
      expect(warn.mock.calls.map(([message]) => String(message))).toEqual([
        expect.stringMatching(
          /^lock \S+ was no longer ours at release: its write was refused: .*fencing token 2 > ours, 1/,
        ),
      ]);
    } finally {
      warn.mockRestore();
    }
  });

  it('without fencing, the same pause oversells (plain `lock`): why fencing exists', async () => {
    const run = await pausedHolder('lock');
    expect(run.bLeft).toEqual([0]);
    expect(run.a).toEqual({ wrote: [-1] });
    expect(run.stock).toBe('-1');
    expect(run.orders).toBe(2);
  });

  /**
   * The fence can miss a second holder: the counter lost (evicted, deleted), or a
   * failover that lost the last acquisition. What still holds then.
   */
  describe('when the fence misses a holder', () => {
    it('never hands out a token below the last one applied, even with the counter gone', async () => {
      const { redis, k } = await product(3);
      const lock = closing(new FencedLockStrategy(redis, { ttlMs: 5_000, waitMs: 1_000 }));
      const order = (userId: string) => [
        { order: { productId: 'phone', userId, quantity: 1 }, orderId: `o-${userId}`, remaining: 0 },
      ];
      // Nine acquisitions: token 9 is the last one applied.
      for (let i = 1; i <= 9; i++) await lock.using(k.lock, async () => undefined);
      await lock.using(k.lock, ({ fence }) => writeOrders(redis, k, 'lock', order('ann'), fence));
      expect(await redis.hget(k.meta, 'fence')).toBe('10');
      // The counter is lost (an eviction under allkeys-*, a DEL by hand)...
      await redis.del(k.fence);
      // ...and the next holder still gets a token above the last applied: a holder
      // paused with token 10 would otherwise pass every check of holders 1 to 10.
      const fence = await lock.using(k.lock, async (hold) => hold.fence);
      expect(fence).toBe(11);
      expect(await redis.get(k.fence)).toBe('11');
    });

    it("refuses a batch that would take a buyer past the limit, which another holder's write did; nothing written", async () => {
      const { redis, k } = await product(5);
      await redis.hset(k.meta, 'perUserLimit', 2);
      const lock = closing(new FencedLockStrategy(redis, { ttlMs: 5_000, waitMs: 1_000 }));
      const err = await lock
        .using(k.lock, async ({ fence }) => {
          // This holder read ann at 0 of 2 and decided one is fine; meanwhile a holder
          // the fence did not see wrote two for her.
          await redis.hincrby(k.buyers, 'ann', 2);
          return writeOrders(
            redis,
            k,
            'lock',
            [
              { order: { productId: 'phone', userId: 'bob', quantity: 1 }, orderId: 'o-bob', remaining: 4 },
              { order: { productId: 'phone', userId: 'ann', quantity: 1 }, orderId: 'o-ann', remaining: 3 },
            ],
            fence,
          );
        })
        .catch((e: unknown) => e);
      // 503 LOCK_BYPASSED, a retry: not the 500 of a bug it was.
      expect(err).toBeInstanceOf(LockBypassedError);
      expect(await redis.get(k.stock)).toBe('5');
      expect(await redis.xlen(k.orders)).toBe(0);
      expect(await redis.hgetall(k.buyers)).toEqual({ ann: '2' });
    });

    it('refuses the write of a sale another strategy family started: STRATEGY_MISMATCH, nothing written', async () => {
      const { redis, k } = await product(5);
      await redis.hset(k.meta, 'soldBy', 'lock-free');
      const lock = closing(new FencedLockStrategy(redis, { ttlMs: 5_000, waitMs: 1_000 }));
      const err = await lock
        .using(k.lock, ({ fence }) =>
          writeOrders(
            redis,
            k,
            'lock',
            [{ order: { productId: 'phone', userId: 'ann', quantity: 1 }, orderId: 'o-ann', remaining: 4 }],
            fence,
          ),
        )
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(StrategyMismatchError);
      expect(await redis.get(k.stock)).toBe('5');
      expect(await redis.xlen(k.orders)).toBe(0);
    });
  });
});
