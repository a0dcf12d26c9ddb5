import { resetPlainSale, startSaleIn, useTestRedis, whileWritesHeld } from '../../../test/helpers/redis';
import { fencedAcquire } from '../../redis/lua-scripts';
import { FencedLockStrategy } from './fenced.strategy';

/** The lock side of fencing; the write side (the fence refusing a late write) is src/orders/fenced-write.spec.ts. */

describe('FencedLockStrategy (fenced) against a real Redis', () => {
  const { client, closing } = useTestRedis();

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
    await resetPlainSale(redis, k, 3, 1);
    expect(await redis.get(k.fence)).toBe('2');
  });

  it("takes only a product's own lock key, the key it releases: another of the product's keys is refused", async () => {
    const { redis, k } = await product(1);
    const lock = closing(new FencedLockStrategy(redis, { ttlMs: 5_000, waitMs: 0 }));
    await expect(lock.tryAcquire(k.stock)).rejects.toThrow(`not a product's lock key: ${k.stock}`);
    await expect(lock.tryAcquire(`${k.lock}x`)).rejects.toThrow("not a product's lock key");
    expect(await redis.exists(k.lock)).toBe(0);
    expect(await redis.get(k.fence)).toBeNull();
  });

  it('a fenced acquisition that timed out but ran afterwards leaves no orphaned lock', async () => {
    const { redis: admin, k } = await product(1);
    const buyer = client({ commandTimeout: 200 }); // gives up after 200 ms, as the app's does after 2 s
    // Cached now, so the held EVALSHA runs the script (a NOSCRIPT reply would come too late for EVAL).
    await buyer.script('LOAD', fencedAcquire.lua);
    const lock = closing(new FencedLockStrategy(buyer, { ttlMs: 30_000, waitMs: 0 }));
    await whileWritesHeld(admin, () => expect(lock.tryAcquire(k.lock)).rejects.toThrow('Command timed out'));
    await buyer.ping(); // answered in order: the held script and whatever followed it have run
    expect(await admin.get(k.fence)).toBe('1'); // the script did run, after the buyer gave up
    expect(await admin.get(k.lock)).toBeNull();
    const next = closing(new FencedLockStrategy(client(), { ttlMs: 30_000, waitMs: 0 }));
    expect(await next.tryAcquire(k.lock)).toMatchObject({ fence: 2 });
  });

  it("takes a batch's read in the step that takes the lock, as readSale() would read it; a held lock reads nothing", async () => {
    const { redis, k } = await product(7);
    await redis.hset(k.buyers, 'ann', 2);
    await redis.hset(k.idem, 'key-1', 'P|claim|x');
    const lock = closing(new FencedLockStrategy(redis, { ttlMs: 5_000, waitMs: 0 }));
    // ARGV[3..]: two buyers' counts, then Idempotency-Keys (orders/sale-store.ts builds them).
    const lease = await lock.tryAcquire(k.lock, [2, 'ann', 'bob', 'key-1', 'key-2']);
    const [meta, stock, now, bought, claims] = lease!.read!;
    expect(lease).toMatchObject({ fence: 1 });
    expect(meta).toEqual(['5', null, expect.any(String), null, null, null, null]); // perUserLimit ... queueRate, epoch
    expect(stock).toBe('7');
    expect(Math.abs((now as number) - Date.now())).toBeLessThan(5_000); // Redis's clock, in ms
    expect(bought).toEqual(['2', null]);
    expect(claims).toEqual(['P|claim|x', null]);
    // Held: nothing read, no token spent.
    const other = closing(new FencedLockStrategy(client(), { ttlMs: 5_000, waitMs: 0 }));
    expect(await other.tryAcquire(k.lock, [1, 'ann'])).toBeNull();
    expect(await redis.get(k.fence)).toBe('1');
    // Without a read, only the token.
    await lock.release(lease!);
    expect(await other.tryAcquire(k.lock)).toEqual(expect.not.objectContaining({ read: expect.anything() }));
  });
});
