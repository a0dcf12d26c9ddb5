import { setTimeout as sleep } from 'node:timers/promises';
import { commandCalls, uniquePrefix, useTestRedis, whileWritesHeld } from '../../../test/helpers/redis';
import { LockExpiredError, LockTimeoutError } from '../../errors/errors';
import { releaseLock } from '../../redis/lua-scripts';
import { releasedChannel } from '../release-subscriber';
import { SetNxLockStrategy } from './lock.strategy';

describe('SetNxLockStrategy (lock) against a real Redis', () => {
  const { client, closing } = useTestRedis();
  let key: string;

  beforeEach(() => {
    key = `${uniquePrefix('lock')}{p:x}:lock`;
  });

  it('sets the token and its TTL in one command, and refuses a second holder', async () => {
    const c = client();
    const lock = closing(new SetNxLockStrategy(c, { ttlMs: 5_000, waitMs: 0 }));
    const lease = await lock.tryAcquire(key);
    expect(lease).not.toBeNull();
    expect(lease!.token).toMatch(new RegExp(`^${process.pid}:[0-9a-f]{32}$`)); // owner pid, 128 random bits
    expect(await c.get(key)).toBe(lease!.token);
    const pttl = await c.pttl(key);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(5_000);
    expect(await closing(new SetNxLockStrategy(client(), { ttlMs: 5_000, waitMs: 0 })).tryAcquire(key)).toBeNull();
  });

  it('release never deletes a lock whose token is not ours', async () => {
    const c = client();
    await c.set(key, 'someone-elses-token', 'PX', 5_000);
    expect(await releaseLock.run(c, [key], 'our-token', `${key}:released`)).toBe(0);
    expect(await c.get(key)).toBe('someone-elses-token');
    expect(await releaseLock.run(c, [key], 'someone-elses-token', `${key}:released`)).toBe(1);
    expect(await c.exists(key)).toBe(0);
  });

  it('a hold that outlived its TTL does not delete the next holder’s lock, and is counted', async () => {
    const observer = client();
    const slow = closing(new SetNxLockStrategy(client(), { ttlMs: 150, waitMs: 0 }));
    const next = closing(new SetNxLockStrategy(client(), { ttlMs: 5_000, waitMs: 0 }));
    const stale = await slow.tryAcquire(key);
    await sleep(250); // the TTL runs out in Redis
    const fresh = await next.tryAcquire(key);
    expect(fresh).not.toBeNull();
    expect(await slow.release(stale!)).toBe(false);
    expect(slow.lostLocks).toBe(1);
    expect(await observer.get(key)).toBe(fresh!.token);
  });

  it('a holder that dies without releasing blocks others only until the TTL', async () => {
    const dying = client();
    const lease = await closing(new SetNxLockStrategy(dying, { ttlMs: 300, waitMs: 0 })).tryAcquire(key);
    expect(lease).not.toBeNull();
    dying.disconnect(); // the process is gone; nobody will ever release
    const survivor = client();
    const other = closing(new SetNxLockStrategy(survivor, { ttlMs: 5_000, waitMs: 3_000 }));
    expect(await other.tryAcquire(key)).toBeNull();
    const taken = await other.acquire(key);
    expect(await survivor.get(key)).toBe(taken.token);
  });

  it('a SET NX that timed out but ran afterwards leaves no orphaned lock: the next buyer gets it at once', async () => {
    const admin = client();
    // Gives up on a command after 200 ms, as the app's client does after 2 s.
    const buyer = client({ commandTimeout: 200 });
    await buyer.ping(); // connected (handshake done) before writes are held
    const lock = closing(new SetNxLockStrategy(buyer, { ttlMs: 30_000, waitMs: 0 }));
    const setsBefore = await commandCalls(admin, 'set');
    await whileWritesHeld(admin, () => expect(lock.tryAcquire(key)).rejects.toThrow('Command timed out'));
    // One connection runs its commands in order: once this PING is answered, the held
    // SET has run, and so has whatever the lock sent after it.
    await buyer.ping();
    expect(await commandCalls(admin, 'set')).toBe(setsBefore + 1); // the SET did run, after the buyer gave up
    expect(await admin.get(key)).toBeNull();
    const next = closing(new SetNxLockStrategy(client(), { ttlMs: 30_000, waitMs: 0 }));
    expect(await next.tryAcquire(key)).not.toBeNull(); // not 30 s of TTL later
  });

  it('acquire gives up with LockTimeoutError after waitMs', async () => {
    const c = client();
    await c.set(key, 'held-elsewhere', 'PX', 10_000);
    const lock = closing(new SetNxLockStrategy(c, { ttlMs: 1_000, waitMs: 100 }));
    await expect(lock.acquire(key)).rejects.toBeInstanceOf(LockTimeoutError);
    expect(await c.get(key)).toBe('held-elsewhere');
  });

  it('using() excludes: 40 contenders on 4 connections never overlap', async () => {
    const locks = Array.from({ length: 4 }, () =>
      closing(new SetNxLockStrategy(client(), { ttlMs: 5_000, waitMs: 10_000 })),
    );
    const counter = client();
    const inside = `${key}:inside`;
    let maxInside = 0;
    let entered = 0;
    await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        locks[i % 4].using(key, async () => {
          // Count holders in Redis itself, so overlap across connections is seen.
          maxInside = Math.max(maxInside, await counter.incr(inside));
          entered++;
          await sleep(1);
          await counter.decr(inside);
        }),
      ),
    );
    expect(entered).toBe(40);
    expect(maxInside).toBe(1);
    expect(await counter.exists(key)).toBe(0);
  });

  it('wakes a contender in another process by the release message, not by polling', async () => {
    const holder = closing(new SetNxLockStrategy(client(), { ttlMs: 10_000, waitMs: 0 }));
    const waiter = closing(new SetNxLockStrategy(client(), { ttlMs: 10_000, waitMs: 30_000 }));
    const held = await holder.acquire(key);
    const admin = client();
    const taken = waiter.acquire(key);
    const channel = releasedChannel(key);
    const subscribed = async () => Number(((await admin.call('PUBSUB', 'SHARDNUMSUB', channel)) as unknown[])[1]);
    const waiting = () => ((waiter as any).subscriber.channels.get(channel)?.wake.size ?? 0) > 0;
    while ((await subscribed()) < 1 || !waiting()) await sleep(1);
    // The message alone, with the lock still held: whatever its fallback poll does, only
    // the message counts a wake-up, and the waiter, finding the lock taken, waits again.
    // A jittered poll can fall between `waiting()` and the message (a loaded machine
    // stretches that gap), so the message is sent again until it finds the waiter waiting.
    for (let sent = 0; waiter.wakeups === 0 && sent < 500; sent++) {
      while (!waiting()) await sleep(1);
      await admin.spublish(channel, 'released');
      await sleep(5);
    }
    expect(waiter.wakeups).toBeGreaterThanOrEqual(1);
    expect(await admin.get(key)).toBe(held.token);
    // And the release sends that message (release-lock-1.lua), heard by another subscriber.
    const listener = client();
    const heard = new Promise<string>((resolve) =>
      listener.on('smessage', (_channel: string, message: string) => resolve(message)),
    );
    await listener.ssubscribe(channel);
    await holder.release(held);
    expect(await heard).toBe('released');
    const lease = await taken;
    expect(await admin.get(key)).toBe(lease.token);
    await waiter.release(lease);
  });

  it('using() releases when the critical section throws', async () => {
    const c = client();
    const lock = closing(new SetNxLockStrategy(c, { ttlMs: 5_000, waitMs: 0 }));
    await expect(lock.using(key, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect(await c.exists(key)).toBe(0);
  });

  it('aborts the section’s signal once the hold can no longer be trusted', async () => {
    const c = client();
    const lock = closing(new SetNxLockStrategy(c, { ttlMs: 200, waitMs: 0 }));
    const outcome = lock.using(key, async ({ signal }) => {
      expect(signal.aborted).toBe(false);
      await sleep(300); // longer than the TTL: Redis has expired the lock
      signal.throwIfAborted();
      return 'wrote';
    });
    await expect(outcome).rejects.toBeInstanceOf(LockExpiredError);
    expect(lock.lostLocks).toBe(1);
  });
});
