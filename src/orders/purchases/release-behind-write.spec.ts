import { startSaleIn, useTestRedis } from '../../../test/helpers/redis';
import { loadConfig } from '../../config/app-config';
import { FencedLockStrategy } from '../../locks/strategies/fenced.strategy';
import { LockLease } from '../../locks/strategies/lock.strategy';
import { fencedWrite } from '../../redis/lua-scripts';
import { FaultStop } from '../fault-stop';
import { BatchedPurchases } from './batched.purchases';

/**
 * Review 42: Hold.releaseBehindWrite sends the release before the fenced write's reply.
 * Whatever makes the write go out a second time after that (LuaScript.run's EVAL after a
 * NOSCRIPT; untilRun on a cluster) now runs it after the lock was given back.
 */
describe('fenced: the release sent behind the write (review 42)', () => {
  const { client, url, closing } = useTestRedis();

  const buy = (b: BatchedPurchases, userId: string, quantity = 1) =>
    b.purchase({ productId: 'phone', userId, quantity }).then(
      (order) => ({ ok: order }),
      (err: { code?: string }) => ({ refused: err.code }),
    );

  it('a write that falls back to EVAL after NOSCRIPT runs while the hold is still ours (the release waits for it)', async () => {
    const redis = client();
    const { keys, k } = await startSaleIn(redis, 10, 1, 'batch');
    const lock = closing(new FencedLockStrategy(redis, { ttlMs: 5_000, waitMs: 2_000 }));
    const config = loadConfig({ REDIS_URL: url(), ADMIN_TOKEN: 'a-long-enough-admin-token', LOCK_STRATEGY: 'fenced' });
    const batches = new BatchedPurchases(lock, keys, redis, config, new FaultStop(null));
    // Redis restarted or failed over (a new master has no script cache): every script is
    // NOSCRIPT once. Then a hold that wrote nothing (a PUT, a batch refused under its hold)
    // loads the acquisition and the release again, but not the fenced write.
    await redis.script('FLUSH');
    await lock.using(k.lock, async () => undefined);

    // Another app process waits for this lock (woken by the release's message): it tries
    // the moment this process's write goes out again, with the whole script (EVAL).
    const other = client();
    const rival = closing(new FencedLockStrategy(other, { ttlMs: 5_000, waitMs: 0 }));
    let rivals: (LockLease | null)[] = [];
    let lockAtWrite: string | null | undefined;
    const evalOf = redis.eval.bind(redis) as (...args: unknown[]) => Promise<unknown>;
    jest.spyOn(redis, 'eval').mockImplementation(((lua: string, ...rest: unknown[]) => {
      if (lua !== fencedWrite.lua) return evalOf(lua, ...rest);
      return (async () => {
        lockAtWrite = await other.get(k.lock);
        rivals = [await rival.tryAcquire(k.lock)];
        return evalOf(lua, ...rest);
      })();
    }) as never);

    const answer = await buy(batches, 'ann');
    // Stock was there, nobody paused, no TTL ran out: the buyer is served; and when its
    // write went out, the lock was still this process's, so the rival did not get it.
    expect({
      answer,
      lockOursAtWrite: lockAtWrite?.startsWith(`${process.pid}:`) ?? false,
      rivalGotLock: rivals[0] !== null,
    }).toEqual({
      answer: { ok: expect.objectContaining({ remaining: 9 }) },
      lockOursAtWrite: true,
      rivalGotLock: false,
    });
    for (const lease of rivals) if (lease) await rival.release(lease);
  });
});
