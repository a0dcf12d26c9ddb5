import { startSaleIn, useTestRedis } from '../../test/helpers/redis';
import type { ProductKeys } from '../redis/key-layout';
import {
  fencedWrite,
  fencedWriteKeys,
  idempotencyAcknowledged,
  idempotencyClaim,
  idempotencyClaimKeys,
  idempotencyRelease,
  purchase,
  purchaseKeys,
} from '../redis/lua-scripts';
import { withIncludes } from '../redis/lua-scripts';
import { stillClaimed, writeOrders } from './sale-store';
import { parseIdempotencyKey } from './idempotency';
import { OUTCOME_TTL_MS } from './order';

/**
 * The Idempotency-Key scripts against a real Redis: a write whose claim was given up
 * (its answer was lost) or taken over writes nothing when it arrives late.
 */
describe('Idempotency-Key claims in Redis', () => {
  const { client } = useTestRedis();
  const CLAIM_TTL_MS = 60_000;
  /** idempotency-claim-3.lua: a claim on `key` by `claimId`, without a pass (fingerprint `fp-<key>` unless given). */
  const claimFor = (
    redis: ReturnType<typeof client>,
    k: ProductKeys,
    key: string,
    claimId: string,
    fingerprint = `fp-${key}`,
    claimTtlMs = CLAIM_TTL_MS,
  ) =>
    idempotencyClaim.run(
      redis,
      idempotencyClaimKeys(k),
      key,
      claimId,
      fingerprint,
      claimTtlMs,
      OUTCOME_TTL_MS,
      '',
      '',
      '',
      '',
    );

  it('claims once; a second claim with the same body is in flight, with another body a mismatch', async () => {
    const redis = client();
    const { k } = await startSaleIn(redis, 5, 1, 'claims');
    expect(await claimFor(redis, k, 'key', 'c1', 'fp')).toEqual(['CLAIMED', 0]);
    const [inFlight, waitMs] = await claimFor(redis, k, 'key', 'c2', 'fp');
    expect(inFlight).toBe('IN_FLIGHT');
    expect(waitMs).toBeGreaterThan(CLAIM_TTL_MS - 5_000);
    expect(await claimFor(redis, k, 'key', 'c3', 'other')).toEqual(['MISMATCH']);
    // The claimer's deadline decides, not the retrier's settings.
    expect((await claimFor(redis, k, 'key', 'c4', 'fp', 0))[0]).toBe('IN_FLIGHT');
    // An abandoned claim (its process died) is taken over once its own deadline passed.
    await claimFor(redis, k, 'short', 'c5', 'fp', 0);
    expect(await claimFor(redis, k, 'short', 'c6', 'fp')).toEqual(['CLAIMED', 0]);
    expect(await redis.hget(k.idem, 'short')).toMatch(/^P\|c6\|/);
    expect(await redis.pttl(k.idem)).toBeGreaterThan(OUTCOME_TTL_MS - 60_000);
  });

  it("the holder's early claim check (stillClaimed) says what the scripts' (isClaimOf) says, field for field", async () => {
    const redis = client();
    const lua = withIncludes(
      '--- @include "includes/idempotency-field"\nreturn isClaimOf(ARGV[1] ~= "" and ARGV[1] or false, ARGV[2]) and 1 or 0',
      'claim-check',
    );
    const claim = { key: 'k', claimId: 'c1', fingerprint: 'fp' };
    for (const held of ['P|c1|99|fp', 'P|c1|', 'P|c10|99|fp', 'P|c|99|fp', 'D|fp|o|1|4', 'P|c1', '']) {
      const inLua = (await redis.eval(lua, 0, held, claim.claimId)) === 1;
      expect([held, stillClaimed(held === '' ? null : held, claim)]).toEqual([held, inLua]);
    }
  });

  it('fenced-write-8.lua: an order whose claim was given up writes nothing; the others are written', async () => {
    const redis = client();
    const { k } = await startSaleIn(redis, 5, 1, 'fenced-claims');
    await redis.set(k.fence, 1);
    for (const [key, id] of [
      ['lost', 'c-lost'],
      ['kept', 'c-kept'],
    ]) {
      await claimFor(redis, k, key, id);
    }
    expect(await idempotencyRelease.run(redis, [k.idem], 'lost', 'c-lost')).toBe(1);
    const reply = await fencedWrite.run(
      redis,
      fencedWriteKeys(k),
      1,
      OUTCOME_TTL_MS,
      'lock',
      '',
      k.marksGuess,
      ...['ann', 1, 'o-ann', 'lost', 'c-lost', ''],
      ...['bob', 1, 'o-bob', 'kept', 'c-kept', ''],
      ...['cid', 1, 'o-cid', '', '', ''],
      // Made with an Admission-Pass that lapsed (by Redis's clock) before this write.
      ...['dan', 1, 'o-dan', '', '', 1],
    );
    // The two orders skipped say why, as every write script says it (OrderSkipped).
    expect(reply).toEqual(['OK', 'CLAIM_LOST', 4, 3, 'PASS_EXPIRED']);
    expect((await redis.xrange(k.orders, '-', '+')).map(([, f]) => f[1])).toEqual(['o-bob', 'o-cid']);
    expect(await redis.hgetall(k.buyers)).toEqual({ bob: '1', cid: '1' });
    expect(await redis.hget(k.idem, 'kept')).toBe('D|fp-kept|o-bob|1|4');
    expect(await redis.hexists(k.idem, 'lost')).toBe(0);
  });

  it('fenced-write-8.lua and keyed-write-7.lua: one key answers one order, even sent twice in one batch', async () => {
    const redis = client();
    const { k } = await startSaleIn(redis, 10, 5, 'one-key-one-order');
    await redis.set(k.fence, 1);
    await claimFor(redis, k, 'k1', 'c1');
    const twice = [...['u1', 1, 'o1', 'k1', 'c1', ''], ...['u2', 2, 'o2', 'k1', 'c1', '']];
    const fenced = await fencedWrite.run(redis, fencedWriteKeys(k), 1, OUTCOME_TTL_MS, 'lock', '', '', ...twice);
    expect(fenced).toEqual(['OK', 9, 'CLAIM_LOST']);
    expect(await redis.hget(k.idem, 'k1')).toBe('D|fp-k1|o1|1|9');
    await claimFor(redis, k, 'k2', 'c2');
    const order = (userId: string, quantity: number) => ({
      order: { productId: 'phone', userId, quantity, claim: { key: 'k2', claimId: 'c2', fingerprint: 'fp-k2' } },
      orderId: `o-${userId}`,
      remaining: 0,
    });
    expect(await writeOrders(redis, k, 'lock', [order('u3', 1), order('u4', 2)])).toEqual([8, 'CLAIM_LOST']);
    expect((await redis.xrange(k.orders, '-', '+')).map(([, f]) => f[1])).toEqual(['o1', 'o-u3']);
    expect(await redis.hget(k.idem, 'k2')).toBe('D|fp-k2|o-u3|1|8');
  });

  it('keyed-write-7.lua (unfenced holds): skips an order whose claim was given up, and a late write past 0 says the -1 it left', async () => {
    const redis = client();
    const { k } = await startSaleIn(redis, 1, 2, 'keyed-claims');
    for (const [key, id] of [
      ['lost', 'c-lost'],
      ['late', 'c-late'],
    ]) {
      await claimFor(redis, k, key, id);
    }
    expect(await idempotencyRelease.run(redis, [k.idem], 'lost', 'c-lost')).toBe(1);
    const order = (userId: string, key: string, claimId: string) => ({
      order: { productId: 'phone', userId, quantity: 1, claim: { key, claimId, fingerprint: `fp-${key}` } },
      orderId: `o-${userId}`,
      remaining: 0,
    });
    // The claim given up: nothing. The other: written, although the unit is gone, as an
    // unfenced late write is (bob's order took it): -1 left, which is no "skipped".
    await redis.decr(k.stock);
    const lapsed = {
      ...order('eve', '', ''),
      order: { productId: 'phone', userId: 'eve', quantity: 1, passExpiresAt: 1 },
    };
    const left = await writeOrders(redis, k, 'lock', [
      order('ann', 'lost', 'c-lost'),
      order('cid', 'late', 'c-late'),
      lapsed,
    ]);
    expect(left).toEqual(['CLAIM_LOST', -1, 'PASS_EXPIRED']);
    expect((await redis.xrange(k.orders, '-', '+')).map(([, f]) => f[1])).toEqual(['o-cid']);
    expect(await redis.hget(k.idem, 'late')).toBe('D|fp-late|o-cid|1|-1');
    expect(await redis.hexists(k.idem, 'lost')).toBe(0);
  });

  it('purchase-7.lua: a late purchase whose claim was taken over by a retry writes nothing', async () => {
    const redis = client();
    const { k } = await startSaleIn(redis, 5, 2, 'atomic-claims');
    const keys = purchaseKeys(k);
    await claimFor(redis, k, 'key', 'first', 'fp');
    await idempotencyRelease.run(redis, [k.idem], 'key', 'first'); // its answer was lost
    await claimFor(redis, k, 'key', 'retry', 'fp');
    expect(
      await purchase.run(redis, keys, 'ann', 1, 'o-retry', 'key', 'retry', OUTCOME_TTL_MS, 'lock-free', '', '', ''),
    ).toEqual(['OK', 4]);
    // The first request's purchase, delivered late:
    expect(
      await purchase.run(redis, keys, 'ann', 1, 'o-first', 'key', 'first', OUTCOME_TTL_MS, 'lock-free', '', '', ''),
    ).toEqual(['CLAIM_LOST']);
    expect(await redis.xlen(k.orders)).toBe(1);
    expect(await redis.get(k.stock)).toBe('4');
    expect(await claimFor(redis, k, 'key', 'again', 'fp')).toEqual(['DONE', 'o-retry', 1, 4, 0]);
  });

  it('idempotency-acknowledged-1.lua: notes replicas beside the order the key holds, which a retry then reads; no other order, no new hash', async () => {
    const redis = client();
    const { k } = await startSaleIn(redis, 5, 2, 'acknowledged');
    const keys = purchaseKeys(k);
    await claimFor(redis, k, 'key', 'c1', 'fp');
    // Only an outcome is noted, and only its own order.
    expect(await idempotencyAcknowledged.run(redis, [k.idem], 'key', 'o-1', 1)).toBe(0);
    await purchase.run(redis, keys, 'ann', 1, 'o-1', 'key', 'c1', OUTCOME_TTL_MS, 'lock-free', '', '', '');
    expect(await idempotencyAcknowledged.run(redis, [k.idem], 'key', 'o-other', 1)).toBe(0);
    expect(await idempotencyAcknowledged.run(redis, [k.idem], 'key', 'o-1', 2)).toBe(1);
    expect(await claimFor(redis, k, 'key', 'c2', 'fp')).toEqual(['DONE', 'o-1', 1, 4, 2]);
    // The note can never be taken for a key (a key holds no space), and keeps the hash's TTL.
    expect(await redis.hget(k.idem, 'key acknowledged')).toBe('2');
    expect(await redis.pttl(k.idem)).toBeGreaterThan(OUTCOME_TTL_MS - 60_000);
    // A hash that is gone (expired, or the sale restarted) is not made again.
    await redis.del(k.idem);
    expect(await idempotencyAcknowledged.run(redis, [k.idem], 'key', 'o-1', 1)).toBe(0);
    expect(await redis.exists(k.idem)).toBe(0);
  });

  it('checks an Admission-Pass in the step that claims its key: unknown, another buyer, lapsed; a used pass replays', async () => {
    const redis = client();
    const { k } = await startSaleIn(redis, 5, 1, 'pass-claims');
    const [s, us] = await redis.time();
    const now = Number(s) * 1000 + Math.floor(Number(us) / 1000);
    // As queue-5.lua admits: x:<pass> -> <ticket>|<buyer>|<expires at>.
    await redis.hset(k.queue, 'x:live', `t1|ann|${now + 60_000}`, 'x:lapsed', `t2|bob|${now - 1}`);
    const claim = (key: string, pass: string, userId: string) =>
      idempotencyClaim.run(
        redis,
        idempotencyClaimKeys(k),
        key,
        'c',
        'fp',
        CLAIM_TTL_MS,
        OUTCOME_TTL_MS,
        pass,
        userId,
        '',
        '',
      );
    expect(await claim('pass forged', 'forged', 'ann')).toEqual(['PASS_INVALID', 'unknown']);
    // A record with no readable expiry vouches for nothing (and is no script error).
    await redis.hset(k.queue, 'x:broken', 't3|ann|');
    expect(await claim('pass broken', 'broken', 'ann')).toEqual(['PASS_INVALID', 'unknown']);
    expect(await claim('pass live', 'live', 'bob')).toEqual(['PASS_INVALID', 'owner']);
    expect(await claim('pass lapsed', 'lapsed', 'bob')).toEqual(['PASS_INVALID', 'expired']);
    // A refused pass claims nothing: no key is left in flight for its retry.
    expect(await redis.hlen(k.idem)).toBe(0);
    expect(await claim('pass live', 'live', 'ann')).toEqual(['CLAIMED', now + 60_000]);
    // A key another request is deciding answers IN_FLIGHT first, whatever the pass says now.
    await redis.hset(k.idem, 'pass lapsed', `P|other|${now + 60_000}|fp`);
    expect((await claim('pass lapsed', 'lapsed', 'bob'))[0]).toBe('IN_FLIGHT');
    // Once a key holds its outcome, a retry is answered it, whatever the pass says now.
    await redis.hset(k.idem, 'pass lapsed', 'D|fp|o-9|1|3');
    expect(await claim('pass lapsed', 'lapsed', 'bob')).toEqual(['DONE', 'o-9', 1, 3, 0]);
  });

  it('reads the header as a bare token or the draft sf-string, and refuses anything else', () => {
    expect(parseIdempotencyKey('abc-123')).toBe('abc-123');
    expect(parseIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"')).toBe('8e03978e-40d5-43e8-bc93-6894a57f9324');
    for (const bad of ['', '""', 'has space', 'é', 'a"b', 'x'.repeat(256)]) {
      expect(() => parseIdempotencyKey(bad)).toThrow(/Idempotency-Key must be/);
    }
  });
});
