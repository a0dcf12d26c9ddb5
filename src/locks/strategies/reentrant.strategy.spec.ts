import { setTimeout as sleep } from 'node:timers/promises';
import { commandCalls, uniquePrefix, useTestRedis, whileWritesHeld } from '../../../test/helpers/redis';
import { LockExpiredError, LockTimeoutError } from '../../errors/errors';
import { reentrantAcquire, reentrantReenter, reentrantRelease } from '../../redis/lua-scripts';
import { ReentrantStrategy } from './reentrant.strategy';

describe('ReentrantStrategy (reentrant) against a real Redis', () => {
  const { client } = useTestRedis();
  const strategies: ReentrantStrategy[] = [];
  let key: string;

  function reentrant(ttlMs: number, waitMs: number): ReentrantStrategy {
    const s = new ReentrantStrategy(client(), { ttlMs, waitMs });
    strategies.push(s);
    return s;
  }

  beforeEach(() => {
    key = `${uniquePrefix('reentrant')}{p:x}:lock`;
  });

  afterAll(() => Promise.all(strategies.map((s) => s.close())));

  it('re-enters: the same owner takes it again, the count goes 1, 2, 1, then the lock is gone', async () => {
    const c = client();
    const lock = reentrant(5_000, 1_000);
    const counts: number[] = [];
    const count = async () => Number(Object.values(await c.hgetall(key))[0] ?? 0);
    await lock.using(key, async () => {
      counts.push(await count());
      await lock.using(key, async () => {
        counts.push(await count());
        expect(await c.pttl(key)).toBeGreaterThan(0);
      });
      counts.push(await count());
    });
    expect(counts).toEqual([1, 2, 1]);
    expect(await c.exists(key)).toBe(0);
  });

  it('re-entry of a lost hold is refused and counted, and takes no fresh lock', async () => {
    const c = client();
    const lock = reentrant(5_000, 1_000);
    const inner = jest.fn();
    const outcome = lock.using(key, async (hold) => {
      // The outer hold is lost (expired, or deleted by an operator) and nobody else took it.
      await c.del(key);
      await lock.using(key, inner);
      return hold;
    });
    await expect(outcome).rejects.toBeInstanceOf(LockExpiredError);
    expect(inner).not.toHaveBeenCalled();
    expect(lock.lostLocks).toBe(1);
    expect(await c.exists(key)).toBe(0);
  });

  it('validity is the clock: a section that blocked past the TTL, with no timer able to run, is refused at assertValid', async () => {
    const lock = reentrant(200, 1_000);
    const seen = await lock
      .using(key, async (hold) => {
        const until = Date.now() + 300;
        while (Date.now() < until); // a GC pause, a blocked event loop: no watchdog, no timer
        expect(hold.signal.aborted).toBe(false); // the timer-driven signal could not say so
        hold.assertValid();
      })
      .catch((err: unknown) => err);
    expect(seen).toBeInstanceOf(LockExpiredError);
  });

  it('excludes other owners: 30 contenders on 3 connections never overlap, in or out of re-entry', async () => {
    const counter = client();
    const locks = [0, 1, 2].map(() => reentrant(5_000, 10_000));
    const inside = `${key}:inside`;
    let maxInside = 0;
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        locks[i % 3].using(key, async () => {
          maxInside = Math.max(maxInside, await counter.incr(inside));
          await locks[i % 3].using(key, () => sleep(1)); // nested: must not deadlock
          await counter.decr(inside);
        }),
      ),
    );
    expect(maxInside).toBe(1);
    expect(await counter.exists(key)).toBe(0);
  });

  it('never releases a lock another owner holds', async () => {
    const c = client();
    await c.hset(key, 'someone-else', '1');
    await c.pexpire(key, 5_000);
    expect(await reentrantRelease.run(c, [key], 'me', 5_000, `${key}:released`, 'one')).toBeNull();
    expect(await c.hget(key, 'someone-else')).toBe('1');
    await expect(reentrant(5_000, 100).using(key, async () => 'never')).rejects.toBeInstanceOf(LockTimeoutError);
  });

  it('the watchdog keeps a long hold alive past several TTLs, then stops', async () => {
    const c = client();
    const lock = reentrant(300, 1_000); // renewed every 100 ms
    const other = reentrant(300, 0);
    await lock.using(key, async ({ signal }) => {
      for (let i = 0; i < 4; i++) {
        await sleep(250);
        expect(await c.pttl(key)).toBeGreaterThan(0); // 1 s in, a 300 ms lock is still ours
        await expect(other.using(key, async () => 'stolen')).rejects.toBeInstanceOf(LockTimeoutError);
      }
      expect(signal.aborted).toBe(false);
    });
    expect(lock.renewals).toBeGreaterThanOrEqual(6);
    expect(await c.exists(key)).toBe(0);
    const renewalsAfter = lock.renewals;
    await sleep(250);
    expect(lock.renewals).toBe(renewalsAfter); // stopped on release
  });

  it('a renewal that finds the lock gone aborts the holder and is counted', async () => {
    const c = client();
    const lock = reentrant(300, 1_000);
    const outcome = lock.using(key, async ({ signal }) => {
      await c.del(key); // the hold is lost (expired while paused, or deleted by a mistake)
      await sleep(250); // the next renewal notices
      signal.throwIfAborted();
      return 'wrote';
    });
    await expect(outcome).rejects.toBeInstanceOf(LockExpiredError);
    expect(lock.lostLocks).toBe(1);
  });

  it('a holder that dies lets others in after the TTL (no watchdog outlives its process)', async () => {
    const dying = client();
    expect(await reentrantAcquire.run(dying, [key], 'dead-process:1', 300)).toBeNull();
    dying.disconnect();
    const c = client();
    expect(await c.pttl(key)).toBeGreaterThan(0);
    const lock = reentrant(5_000, 3_000);
    await expect(lock.using(key, async () => 'bought')).resolves.toBe('bought');
  });

  it('wakes a waiter by the release message, not by its bounded wait running out', async () => {
    const holder = reentrant(10_000, 1_000);
    const waiter = reentrant(10_000, 5_000);
    const held = holder.using(key, () => sleep(200));
    await sleep(20);
    // The holder's lock has ~10 s left, so the waiter's timed wait is its 1 s cap;
    // the release message ends that wait early, and the counter says so.
    await expect(waiter.using(key, async () => 'bought')).resolves.toBe('bought');
    await held;
    expect(waiter.wakeups).toBe(1);
  });

  it('an acquisition that timed out but ran afterwards leaves no orphaned lock', async () => {
    const admin = client();
    const buyer = client({ commandTimeout: 200 }); // gives up after 200 ms, as the app's does after 2 s
    // Cached now, so the held EVALSHA runs the script (a NOSCRIPT reply would come too late for EVAL).
    await buyer.script('LOAD', reentrantAcquire.lua);
    const lock = new ReentrantStrategy(buyer, { ttlMs: 30_000, waitMs: 0 });
    strategies.push(lock);
    const ranBefore = await commandCalls(admin, 'evalsha');
    await whileWritesHeld(admin, () =>
      expect(lock.using(key, async () => 'bought')).rejects.toThrow('Command timed out'),
    );
    await buyer.ping(); // answered in order: the held script and whatever followed it have run
    expect(await commandCalls(admin, 'evalsha')).toBe(ranBefore + 1); // the acquisition did run, after the buyer gave up
    expect(await admin.exists(key)).toBe(0);
    await expect(reentrant(30_000, 0).using(key, async () => 'bought')).resolves.toBe('bought');
  });

  it('a re-entry that timed out but ran afterwards leaves no hold nobody owns: the lock is free at once', async () => {
    const admin = client();
    const buyer = client({ commandTimeout: 200 }); // gives up after 200 ms, as the app's does after 2 s
    // Cached now, so the held EVALSHA runs the script (a NOSCRIPT reply would come too late for EVAL).
    await buyer.script('LOAD', reentrantReenter.lua);
    const lock = new ReentrantStrategy(buyer, { ttlMs: 30_000, waitMs: 1_000 });
    strategies.push(lock);
    const ranBefore = await commandCalls(admin, 'evalsha');
    let outerSignal: AbortSignal | undefined;
    await expect(
      lock.using(key, async (outer) => {
        outerSignal = outer.signal;
        await whileWritesHeld(admin, () => lock.using(key, async () => 'inner'));
      }),
    ).rejects.toThrow('Command timed out');
    await buyer.ping(); // answered in order: the held re-entry, then the undo, have run
    // The re-entry did run (count 2) after the buyer gave up on it...
    expect(await commandCalls(admin, 'evalsha')).toBeGreaterThanOrEqual(ranBefore + 2);
    // ...and yet nothing is left: not a count of 1 with a 30 s TTL that blocks the product.
    expect(await admin.exists(key)).toBe(0);
    // The outer hold was declared lost: its section may not write after it.
    expect(outerSignal?.aborted).toBe(true);
    expect(lock.lostLocks).toBe(1);
    await expect(reentrant(30_000, 0).using(key, async () => 'bought')).resolves.toBe('bought');
  });
});
