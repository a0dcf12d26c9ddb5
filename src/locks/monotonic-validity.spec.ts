import { uniquePrefix, useTestRedis } from '../../test/helpers/redis';
import { LockExpiredError } from '../errors/errors';
import type { Lock } from './lock';
import { FencedLockStrategy } from './strategies/fenced.strategy';
import { SetNxLockStrategy } from './strategies/lock.strategy';
import { ReentrantStrategy } from './strategies/reentrant.strategy';

/**
 * A hold's validity is measured on the monotonic clock. The wall clock can step back
 * (NTP, an operator): measured on it, a hold that outlived its TTL while its process
 * could run no timer would pass assertValid() for as long as the step, and write
 * after another holder took the lock.
 */
describe('validity on a monotonic clock, against a real Redis', () => {
  const { client, closing } = useTestRedis();

  it.each<[string, (ttlMs: number) => Lock]>([
    ['lock', (ttlMs) => new SetNxLockStrategy(client(), { ttlMs, waitMs: 1_000 })],
    ['fenced', (ttlMs) => new FencedLockStrategy(client(), { ttlMs, waitMs: 1_000 })],
    ['reentrant', (ttlMs) => new ReentrantStrategy(client(), { ttlMs, waitMs: 1_000 })],
  ])(
    '%s: a hold that blocked past its TTL while the wall clock stepped back an hour is refused at assertValid',
    async (_name, make) => {
      const lock = closing(make(200));
      const key = `${uniquePrefix('monotonic')}{p:x}:lock`;
      const wall = Date.now.bind(Date);
      const seen = await lock
        .using(key, async (hold) => {
          const stepBack = jest.spyOn(Date, 'now').mockImplementation(() => wall() - 3_600_000);
          try {
            const until = performance.now() + 300;
            while (performance.now() < until); // a GC pause, a blocked event loop: no timer runs
            expect(hold.signal.aborted).toBe(false); // the timer-driven signal could not say so
            hold.assertValid();
          } finally {
            stepBack.mockRestore();
          }
        })
        .catch((err: unknown) => err);
      expect(seen).toBeInstanceOf(LockExpiredError);
    },
  );
});
