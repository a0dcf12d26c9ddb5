import { startSaleIn, useTestRedis } from '../../../test/helpers/redis';
import { loadConfig } from '../../config/app-config';
import { FencedLockStrategy } from '../../locks/strategies/fenced.strategy';
import { SetNxLockStrategy } from '../../locks/strategies/lock.strategy';
import { setTimeout as sleep } from 'node:timers/promises';
import { releasedChannel } from '../../locks/release-subscriber';
import { LockLease } from '../../locks/strategies/lock.strategy';
import { fencedAcquire, fencedWrite, releaseLock } from '../../redis/lua-scripts';
import { acquireReadArgs, readSale, saleReadOf } from '../sale-store';
import { FaultStop } from '../fault-stop';
import { BatchedPurchases } from './batched.purchases';

describe('BatchedPurchases (lock coalescing) against a real Redis', () => {
  const { client, url, closing } = useTestRedis();

  async function sale(stock: number, perUserLimit: number, options = { ttlMs: 5_000, waitMs: 2_000 }) {
    const redis = client();
    const { keys, k } = await startSaleIn(redis, stock, perUserLimit, 'batch');
    const lock = closing(new SetNxLockStrategy(redis, options));
    const holds = jest.spyOn(lock, 'using');
    const config = loadConfig({
      REDIS_URL: url(),
      ADMIN_TOKEN: 'a-long-enough-admin-token',
      LOCK_WAIT_MS: String(options.waitMs),
    });
    return {
      redis,
      k,
      keys,
      lock,
      config,
      holds,
      batches: new BatchedPurchases(lock, keys, redis, config, new FaultStop(null)),
    };
  }

  /** A sale of 10 (limit 1) sold under `fenced`, as the app's default runs it. */
  async function fencedSale(name: string, waitMs = 2_000) {
    const redis = client();
    const { keys, k } = await startSaleIn(redis, 10, 1, name);
    const lock = closing(new FencedLockStrategy(redis, { ttlMs: 5_000, waitMs }));
    const config = loadConfig({
      REDIS_URL: url(),
      ADMIN_TOKEN: 'a-long-enough-admin-token',
      LOCK_STRATEGY: 'fenced',
      LOCK_WAIT_MS: String(waitMs),
    });
    return { redis, k, lock, batches: new BatchedPurchases(lock, keys, redis, config, new FaultStop(null)) };
  }

  const buy = (b: BatchedPurchases, userId: string, quantity = 1) =>
    b.purchase({ productId: 'phone', userId, quantity }).then(
      (order) => ({ ok: order }),
      (err: { code?: string }) => ({ refused: err.code }),
    );

  it('serves a crowd in a few holds, sells exactly the stock, and keeps every order', async () => {
    const { redis, k, holds, batches } = await sale(50, 1);
    const answers = await Promise.all(Array.from({ length: 400 }, (_, i) => buy(batches, `u${i}`)));
    const sold = answers.flatMap((a) => ('ok' in a ? [a.ok] : []));
    expect(sold).toHaveLength(50);
    expect(answers.filter((a) => 'refused' in a && a.refused === 'SOLD_OUT')).toHaveLength(350);
    // Coalesced: far fewer holds than buyers (one per buyer would be 400).
    expect(holds.mock.calls.length).toBeGreaterThanOrEqual(1);
    expect(holds.mock.calls.length).toBeLessThan(20);
    expect(await redis.get(k.stock)).toBe('0');
    expect(await redis.exists(k.lock)).toBe(0);
    const logged = (await redis.xrange(k.orders, '-', '+')).map(([, fields]) => fields[1]);
    expect(new Set(logged)).toEqual(new Set(sold.map((o) => o.orderId)));
    // Each acknowledged order says what was left after it: 49 down to 0, once each.
    expect(sold.map((o) => o.remaining).sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });

  it('applies the rules in arrival order inside one batch: the same buyer twice, the last units', async () => {
    const { redis, k, batches } = await sale(3, 2);
    // All issued in one tick, so they land in the same batch.
    const answers = await Promise.all([
      buy(batches, 'ann', 2),
      buy(batches, 'ann', 1), // would make 3 > limit 2
      buy(batches, 'bob', 2), // only 1 left after ann
      buy(batches, 'cid', 1),
      buy(batches, 'dan', 1),
    ]);
    expect(answers.map((a) => ('ok' in a ? a.ok.remaining : a.refused))).toEqual([
      1,
      'LIMIT_REACHED',
      'INSUFFICIENT_STOCK',
      0,
      'SOLD_OUT',
    ]);
    expect(await redis.hgetall(k.buyers)).toEqual({ ann: '2', cid: '1' });
    expect(await redis.xlen(k.orders)).toBe(2);
  });

  it('answers final refusals without the lock, and the rest LOCK_TIMEOUT when the lock stays taken', async () => {
    const { redis, k, holds, batches } = await sale(5, 1, { ttlMs: 5_000, waitMs: 300 });
    await redis.hset(k.buyers, 'had-one', 1);
    await redis.set(k.lock, 'another-process', 'PX', 10_000);
    const answers = await Promise.all([buy(batches, 'had-one'), buy(batches, 'new-1'), buy(batches, 'new-2')]);
    expect(answers).toEqual([{ refused: 'LIMIT_REACHED' }, { refused: 'LOCK_TIMEOUT' }, { refused: 'LOCK_TIMEOUT' }]);
    expect(holds).toHaveBeenCalledTimes(1);
    expect(await redis.get(k.stock)).toBe('5');
    expect(await redis.get(k.lock)).toBe('another-process');

    // Sold out meanwhile (by whoever held the lock): the refusal needs no lock at all.
    await redis.set(k.stock, 0);
    expect(await buy(batches, 'new-3')).toEqual({ refused: 'SOLD_OUT' });
    expect(holds).toHaveBeenCalledTimes(1);
  });

  it('answers LOCK_TIMEOUT by each buyer’s deadline while Redis hangs, not when it comes back', async () => {
    const { redis, k, batches } = await sale(10, 1, { ttlMs: 5_000, waitMs: 200 });
    await client().call('CLIENT', 'PAUSE', '1500', 'ALL');
    let redisBack = false;
    const probe = client()
      .ping()
      .then(() => (redisBack = true));
    const answers = await Promise.all([buy(batches, 'a'), buy(batches, 'b')]);
    expect(redisBack).toBe(false); // answered while Redis was still paused: no hang
    expect(answers).toEqual([{ refused: 'LOCK_TIMEOUT' }, { refused: 'LOCK_TIMEOUT' }]);
    await probe;
    expect(await redis.get(k.stock)).toBe('10');
    expect(await redis.xlen(k.orders)).toBe(0);
  });

  it('writes nothing when the hold expired before the write, and answers every buyer of the batch', async () => {
    const { redis, k, lock, batches } = await sale(10, 1, { ttlMs: 60, waitMs: 2_000 });
    // A real pause of Redis right after the lock is taken (as a slow Redis or a GC
    // pause would): the batch's locked read waits it out, past the 60 ms lease.
    const pauser = client();
    const acquire = lock.tryAcquire.bind(lock);
    jest.spyOn(lock, 'tryAcquire').mockImplementation(async (key) => {
      const lease = await acquire(key);
      await pauser.call('CLIENT', 'PAUSE', '150', 'ALL');
      return lease;
    });
    const answers = await Promise.all([buy(batches, 'a'), buy(batches, 'b')]);
    expect(answers).toEqual([{ refused: 'LOCK_EXPIRED' }, { refused: 'LOCK_EXPIRED' }]);
    expect(await redis.get(k.stock)).toBe('10');
    expect(await redis.xlen(k.orders)).toBe(0);
  });

  it('checks validity by the clock: a pause that ends while the locked read’s reply is handled still stops the write', async () => {
    const { redis, k, keys, lock, config } = await sale(10, 1, { ttlMs: 100, waitMs: 2_000 });
    // The same Redis, with the process frozen (a GC pause, a blocked event loop) right
    // as the second read's reply is handled: from there to the validity check only
    // promise continuations run, so no timer can fire in between.
    let reads = 0;
    const frozen = new Proxy(redis, {
      get(target, prop) {
        if (prop !== 'pipeline') {
          const value = Reflect.get(target, prop, target) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        }
        return () => {
          const pipeline = target.pipeline();
          const exec = pipeline.exec.bind(pipeline);
          pipeline.exec = async () => {
            const replies = await exec();
            if (++reads === 2) {
              const until = Date.now() + 200;
              while (Date.now() < until); // past the 100 ms lease
            }
            return replies;
          };
          return pipeline;
        };
      },
    });
    const batches = new BatchedPurchases(lock, keys, frozen, config, new FaultStop(null));
    expect(await buy(batches, 'a')).toEqual({ refused: 'LOCK_EXPIRED' });
    expect(reads).toBe(2);
    expect(await redis.get(k.stock)).toBe('10');
    expect(await redis.xlen(k.orders)).toBe(0);
  });

  it('LOCK_WAIT_MS=0 means try once: a free lock sells, a taken one answers LOCK_TIMEOUT at once', async () => {
    const { redis, k, batches } = await sale(5, 1, { ttlMs: 5_000, waitMs: 0 });
    expect(await buy(batches, 'free')).toMatchObject({ ok: { remaining: 4 } });
    await redis.set(k.lock, 'another-process', 'PX', 10_000);
    expect(await buy(batches, 'taken')).toEqual({ refused: 'LOCK_TIMEOUT' });
    expect(await redis.get(k.stock)).toBe('4');
  });

  it('keeps each buyer’s own deadline in a batch: a later buyer is not timed out with an earlier one', async () => {
    const { redis, k, batches } = await sale(5, 1, { ttlMs: 5_000, waitMs: 1_000 });
    await redis.set(k.lock, 'another-process', 'PX', 30_000);
    // x's batch waits for the taken lock until x's deadline (t+1000); a (t+200) and b
    // (t+600) queue behind it and form the next batch together, both still waiting
    // when it starts, a with a deadline 400 ms before b's.
    const x = buy(batches, 'x');
    await sleep(200);
    const a = buy(batches, 'a');
    await sleep(400);
    const b = buy(batches, 'b');
    expect(await x).toEqual({ refused: 'LOCK_TIMEOUT' });
    // When a's own deadline has passed, the other process releases the lock (and says so).
    expect(await a).toEqual({ refused: 'LOCK_TIMEOUT' });
    await releaseLock.run(redis, [k.lock], 'another-process', releasedChannel(k.lock));
    expect(await b).toMatchObject({ ok: { userId: 'b', remaining: 4 } });
  });

  it('leaves out a keyed buyer whose claim lapsed before deciding, so the buyer after it is not refused for its units', async () => {
    const { redis, k, batches } = await sale(1, 1);
    // a's claim on its Idempotency-Key is gone (given up, or taken over by a retry).
    const claim = { key: 'key-a', claimId: 'claim-a', fingerprint: 'fp-a' };
    const [a, b] = await Promise.all([
      batches.purchase({ productId: 'phone', userId: 'a', quantity: 1, claim }).then(
        (o) => ({ ok: o.userId }),
        (err: { code?: string }) => ({ refused: err.code }),
      ),
      buy(batches, 'b'),
    ]);
    expect(a).toEqual({ refused: 'IDEMPOTENCY_KEY_IN_USE' });
    expect(b).toMatchObject({ ok: { userId: 'b', remaining: 0 } });
    expect(await redis.get(k.stock)).toBe('0');
    expect(await redis.hgetall(k.buyers)).toEqual({ b: '1' });
  });

  it('while the sale is plainly on, the unlocked read goes out once the lock turns out taken: its refusals still come at once while another process holds the lock', async () => {
    const { redis, k, holds, batches } = await sale(10, 1, { ttlMs: 5_000, waitMs: 1_500 });
    // This process's hold leaves 9 units: the sale is plainly on for the next second.
    expect(await buy(batches, 'ann')).toMatchObject({ ok: { remaining: 9 } });
    // Another process sells the rest and keeps the lock (busy, or paused).
    await redis.set(k.stock, 0);
    await redis.set(k.lock, 'another-process', 'PX', 10_000);
    const answers = await Promise.all([buy(batches, 'bob'), buy(batches, 'ann')]);
    // Final refusals, not LOCK_TIMEOUT after the wait: the read did not wait for the lock.
    expect(answers).toEqual([{ refused: 'SOLD_OUT' }, { refused: 'LIMIT_REACHED' }]);
    expect(await redis.get(k.lock)).toBe('another-process');
    // That read saw the sell-out: the next buyer is refused by a read before the lock,
    // and never asks for it.
    const asked = holds.mock.calls.length;
    expect(await buy(batches, 'fay')).toEqual({ refused: 'SOLD_OUT' });
    expect(holds.mock.calls.length).toBe(asked);
    // With stock left, a buyer still waits for the lock and buys once it is free.
    await redis.set(k.stock, 5);
    const cid = buy(batches, 'cid');
    await sleep(100);
    await redis.del(k.lock);
    expect(await cid).toMatchObject({ ok: { remaining: 4 } });
    // Sold out by this process's own hold: the tail is refused without the lock.
    await redis.set(k.stock, 1);
    expect(await buy(batches, 'dan')).toMatchObject({ ok: { remaining: 0 } });
    const held = holds.mock.calls.length;
    expect(await buy(batches, 'eve')).toEqual({ refused: 'SOLD_OUT' });
    expect(holds.mock.calls.length).toBe(held);
  });

  it('a shutdown waits for every batch in hand, so no hold is left to its TTL by the closed connection', async () => {
    const { redis, k, batches } = await sale(10, 1, { ttlMs: 5_000, waitMs: 5_000 });
    // Another process holds the lock until this test frees it: cid's batch waits for it.
    await redis.set(k.lock, 'another-process', 'PX', 10_000);
    const cid = buy(batches, 'cid');
    let shutDown = false;
    const shutdown = batches.beforeApplicationShutdown().then(() => (shutDown = true));
    await sleep(50);
    expect(shutDown).toBe(false);
    await redis.del(k.lock);
    expect(await cid).toMatchObject({ ok: { remaining: 9 } });
    await shutdown;
    expect(await redis.exists(k.lock)).toBe(0);
  });

  it('under fenced, the read comes with the acquisition: a hold is three round trips, and no read goes out beside it while the lock is free', async () => {
    const { redis, k, batches } = await fencedSale('batch');
    // The first hold of the sale reads before it acquires (nothing says the sale is on yet).
    expect(await buy(batches, 'ann')).toMatchObject({ ok: { remaining: 9 } });
    // What goes to Redis from here, in order: each script sent, and each reply heard.
    const names = new Map([
      [fencedAcquire.sha1, 'acquire'],
      [fencedWrite.sha1, 'write'],
      [releaseLock.sha1, 'release'],
    ]);
    const events: string[] = [];
    const evalsha = redis.evalsha.bind(redis) as (...args: unknown[]) => Promise<unknown>;
    jest.spyOn(redis, 'evalsha').mockImplementation(((sha: string, ...rest: unknown[]) => {
      const name = names.get(sha) ?? sha;
      events.push(`send ${name}`);
      const reply = evalsha(sha, ...rest);
      reply.then(
        () => events.push(`reply ${name}`),
        () => events.push(`error ${name}`),
      );
      return reply;
    }) as never);
    const reads = [jest.spyOn(redis, 'pipeline'), jest.spyOn(redis, 'multi')];
    // Plainly on, the lock free: no read of its own before or beside the acquisition.
    expect(await Promise.all([buy(batches, 'bob'), buy(batches, 'cid')])).toMatchObject([
      { ok: { remaining: 8 } },
      { ok: { remaining: 7 } },
    ]);
    expect(reads.map((spy) => spy.mock.calls.length)).toEqual([0, 0]);
    // Two holds (cid came while bob's was being taken); in each, the release waits for
    // the write's reply (see docs/lock.md: sent behind it, it could run first).
    const hold = ['send acquire', 'reply acquire', 'send write', 'reply write', 'send release', 'reply release'];
    expect(events).toEqual([...hold, ...hold]);
    expect(await redis.exists(k.lock)).toBe(0);
    expect(await redis.hgetall(k.buyers)).toEqual({ ann: '1', bob: '1', cid: '1' });
  });

  it('the read a fenced acquisition takes is the one readSale() takes, field for field', async () => {
    const redis = client();
    const { k } = await startSaleIn(redis, 7, 3, 'batch');
    // Every field either read looks at, set: window, waiting room, family, counts, claims.
    await redis.hset(k.meta, 'startsAt', 1_000, 'endsAt', 9_000_000_000_000, 'queueRate', 50, 'soldBy', 'lock');
    await redis.hset(k.buyers, 'ann', 2);
    await redis.hset(k.idem, 'key-1', 'P|claim|x');
    const lock = closing(new FencedLockStrategy(redis, { ttlMs: 5_000, waitMs: 0 }));
    const lease = await lock.tryAcquire(k.lock, acquireReadArgs(['ann', 'bob'], ['key-1', 'key-2']));
    const taken = saleReadOf(lease!.read!, k, 'lock');
    const read = await readSale(redis, k, 'lock', ['ann', 'bob'], ['key-1', 'key-2']);
    // The same sale, but for the instant each read it at.
    const at = (r: typeof read) => ({ ...r, sale: r.sale && { ...r.sale, now: 0 } });
    expect(at(taken)).toEqual(at(read));
    expect(taken).toMatchObject({ sale: { perUserLimit: 3, stock: 7, startsAt: 1_000, queued: true }, bought: [2, 0] });
    expect(Math.abs(taken.sale!.now - read.sale!.now)).toBeLessThan(60_000);
    // Sold by another family: refused from the acquisition's read as from readSale().
    await lock.release(lease!);
    await redis.hset(k.meta, 'soldBy', 'lock-free');
    const again = await lock.tryAcquire(k.lock, acquireReadArgs(['ann'], []));
    expect(() => saleReadOf(again!.read!, k, 'lock')).toThrow(expect.objectContaining({ code: 'STRATEGY_MISMATCH' }));
    await lock.release(again!);
  });

  it('LOCK_WAIT_MS=0, plainly on, the lock held elsewhere: the read sent on the wait still answers a final refusal, not LOCK_TIMEOUT', async () => {
    const { k, batches } = await fencedSale('trysonce', 0);
    // ann buys her one unit (limit 1); this hold leaves 9: the sale is plainly on.
    expect(await buy(batches, 'ann')).toMatchObject({ ok: { remaining: 9 } });
    // Another app process holds the product's lock: the one try fails at once.
    const rival = closing(new FencedLockStrategy(client(), { ttlMs: 5_000, waitMs: 0 }));
    const held = await rival.tryAcquire(k.lock);
    expect(held).not.toBeNull();
    try {
      expect(await Promise.all([buy(batches, 'ann'), buy(batches, 'bob')])).toEqual([
        { refused: 'LIMIT_REACHED' },
        { refused: 'LOCK_TIMEOUT' },
      ]);
    } finally {
      await rival.release(held!);
    }
  });

  it('under fenced, a write sent again after NOSCRIPT (EVAL) still runs under the hold: the release waits for its reply', async () => {
    const { redis, k, lock, batches } = await fencedSale('batch');
    // Redis restarted or failed over (a new master has no script cache): every script is
    // NOSCRIPT once. Then a hold that wrote nothing (a PUT, a batch refused under its hold)
    // loads the acquisition and the release again, but not the fenced write.
    await redis.script('FLUSH');
    await lock.using(k.lock, async () => undefined);
    // Another app process waiting for this lock tries the moment this process's write
    // goes out again, with the whole script (EVAL).
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
    // Stock was there, nobody paused, no TTL ran out: the buyer is served; when its write
    // went out again the lock was still this process's, so the rival did not get it.
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
