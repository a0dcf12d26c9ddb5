import { startSaleIn, useTestRedis } from '../../../test/helpers/redis';
import { ReentrantStrategy } from '../../locks/strategies/reentrant.strategy';
import { reentrantRelease } from '../../redis/lua-scripts';
import { FaultStop } from '../fault-stop';
import { ReentrantPurchases } from './reentrant.purchases';
import { loadConfig } from '../../config/app-config';

const CONFIG = loadConfig({
  REDIS_URL: 'redis://unused:1',
  ADMIN_TOKEN: 'a-long-enough-admin-token',
  LOCK_STRATEGY: 'reentrant',
});

describe('ReentrantPurchases (reentrant) against a real Redis', () => {
  const { client, closing } = useTestRedis();

  it('re-enters the lock it holds to record the order: Redis counts 2 holds, released one by one', async () => {
    const redis = client();
    const { keys, k } = await startSaleIn(redis, 3, 1, 'reenter');
    const lock = closing(new ReentrantStrategy(redis, { ttlMs: 5_000, waitMs: 1_000 }));
    const releases = jest.spyOn(reentrantRelease, 'run');
    try {
      const order = await new ReentrantPurchases(lock, keys, redis, new FaultStop(null), CONFIG).purchase({
        productId: 'phone',
        userId: 'ann',
        quantity: 1,
      });
      expect(order).toMatchObject({ userId: 'ann', remaining: 2 });
      // reentrant-release-1.lua answers 0 while holds remain, 1 when the lock is freed:
      // the inner hold left a count of 1 behind, the outer one freed it.
      expect(await Promise.all(releases.mock.results.map((r) => r.value))).toEqual([0, 1]);
    } finally {
      releases.mockRestore();
    }
    expect(await redis.exists(k.lock)).toBe(0);
    expect(await redis.xlen(k.orders)).toBe(1);
  });
});
