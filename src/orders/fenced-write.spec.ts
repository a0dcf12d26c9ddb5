import { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { startSaleIn, useTestRedis } from '../../test/helpers/redis';
import { StaleLockError } from '../errors/errors';
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
        return writeOrders(redis, k, [buy('a')], fence);
      })
      .then(
        (left) => ({ wrote: left }),
        (err: Error) => ({ refused: err }),
      );
    await sleep(200); // past A's TTL: the lock is free in Redis
    const bLeft = await b.using(k.lock, async ({ fence }) => {
      expect(await redis.get(k.stock)).toBe('1');
      return writeOrders(redis, k, [buy('b')], fence);
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
});
