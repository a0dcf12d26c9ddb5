import { startSaleIn, useClosing, useTestRedis } from '../../../test/helpers/redis';
import { resetSale } from '../../redis/lua-scripts';
import { FencedLockStrategy } from './fenced.strategy';

/** The lock side of fencing; the write side (the fence refusing a late write) is src/orders/fenced-write.spec.ts. */

describe('FencedLockStrategy (fenced) against a real Redis', () => {
  const { client } = useTestRedis();
  const closing = useClosing();

  async function product(stock: number) {
    const redis = client();
    return { redis, ...(await startSaleIn(redis, stock, 5, 'fenced')) };
  }

  it('gives every acquisition, by anyone, a larger token, set atomically with the lock', async () => {
    const { redis, k } = await product(1);
    const a = closing(new FencedLockStrategy(redis, { ttlMs: 5_000, waitMs: 0 }));
    const b = closing(new FencedLockStrategy(client(), { ttlMs: 5_000, waitMs: 0 }));
    const first = await a.tryAcquire(k.lock);
    expect(first).toMatchObject({ fence: 1 });
    expect(await b.tryAcquire(k.lock)).toBeNull(); // held: no token spent
    expect(await redis.get(k.fence)).toBe('1');
    expect(await redis.pttl(k.lock)).toBeGreaterThan(0);
    await a.release(first!);
    expect(await b.tryAcquire(k.lock)).toMatchObject({ fence: 2 });
    // A sale reset never touches the counter: tokens only grow.
    await resetSale.run(redis, [k.meta, k.stock, k.buyers, k.orders], 3, 1);
    expect(await redis.get(k.fence)).toBe('2');
  });
});
