import { startSaleIn, useTestRedis } from '../../../test/helpers/redis';
import { loadConfig } from '../../config/app-config';
import { FencedLockStrategy } from '../../locks/strategies/fenced.strategy';
import { FaultStop } from '../fault-stop';
import { BatchedPurchases } from './batched.purchases';

/**
 * Review 42: while the sale is plainly on, the batch's unlocked read now goes out only
 * once the lock turns out taken (UsingOptions.onWait), i.e. after the first try's reply.
 * With LOCK_WAIT_MS=0 ("try once") that try is also the last: LockTimeoutError is thrown
 * in the same tick, before the read's reply, so its final refusals never reach anyone.
 */
describe('fenced, LOCK_WAIT_MS=0, plainly on: the unlocked read sent on the wait (review 42)', () => {
  const { client, url, closing } = useTestRedis();

  it("a buyer at its limit hears LIMIT_REACHED, not LOCK_TIMEOUT, while another process holds the lock (docs/lock.md: the read's refusals still come at once)", async () => {
    const redis = client();
    const { keys, k } = await startSaleIn(redis, 10, 1, 'trysonce');
    const lock = closing(new FencedLockStrategy(redis, { ttlMs: 5_000, waitMs: 0 }));
    const config = loadConfig({
      REDIS_URL: url(),
      ADMIN_TOKEN: 'a-long-enough-admin-token',
      LOCK_STRATEGY: 'fenced',
      LOCK_WAIT_MS: '0',
    });
    const batches = new BatchedPurchases(lock, keys, redis, config, new FaultStop(null));
    const buy = (userId: string) =>
      batches.purchase({ productId: 'phone', userId, quantity: 1 }).then(
        (order) => ({ ok: order }),
        (err: { code?: string }) => ({ refused: err.code }),
      );
    // ann buys her one unit (limit 1); this hold leaves 9: the sale is plainly on.
    expect(await buy('ann')).toMatchObject({ ok: { remaining: 9 } });
    // Another app process holds the product's lock.
    const rival = closing(new FencedLockStrategy(client(), { ttlMs: 5_000, waitMs: 0 }));
    const held = await rival.tryAcquire(k.lock);
    expect(held).not.toBeNull();
    try {
      // Her second order is refused for a final reason the read knows: her limit.
      expect(await buy('ann')).toEqual({ refused: 'LIMIT_REACHED' });
    } finally {
      await rival.release(held!);
    }
  });
});
