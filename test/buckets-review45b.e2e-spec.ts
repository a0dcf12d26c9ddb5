import { moveDone, moveDoneKeys, moveIn, moveInKeys, moveOut, moveOutKeys } from '../src/redis/lua-scripts';
import { KeyLayout } from '../src/redis/key-layout';
import { Escrow } from '../src/orders/escrow';
import { request } from './helpers/app';
import { uniquePrefix } from './helpers/redis';
import { bucketsOnOneRedis, usersOf } from './helpers/buckets-on-one-redis';

/**
 * Outside review 45b of fe2d865..b9dafa7 (bucket lists carried to the purchase, a
 * sale's epoch `<list>.<sale>`, refills that refuse only what a second read confirmed):
 * each test fails on b9dafa7.
 */
describe('review 45b: bucket lists and confirmed refills', () => {
  const { redis, app, put, buy, ids } = bucketsOnOneRedis();

  it('no INSUFFICIENT_STOCK from an unconfirmed short total: a refill whose move succeeded answers the total of one torn read', async () => {
    const prefix = uniquePrefix('r45b-short');
    const keys = new KeyLayout(prefix);
    const { url, app: nest } = await app(prefix, 'atomic');
    // 6 units, 2 in each bucket; the buyer (home bucket 1) asks for 5, which the product has.
    expect((await put(url, 'cam', { stock: 6, perUserLimit: 5, buckets: 3 })).status).toBe(200);
    const b = await ids(url, 'cam');
    const c = redis.client();
    const escrow = nest.get(Escrow);
    const read = escrow.read.bind(escrow);
    let reads = 0;
    // The refill's first read of three shards is three reads: bucket 0 read, then another
    // instance's refill moves bucket 2's two units whole to bucket 0 (the real move
    // scripts), then buckets 1 and 2 read. The read adds up to 4; 6 were there throughout.
    jest.spyOn(escrow, 'read').mockImplementation(async (buckets: readonly string[]) => {
      reads++;
      if (reads !== 1) return read(buckets);
      const first = await read(buckets.slice(0, 1));
      const [status, units, epoch] = await moveOut.run(c, moveOutKeys(keys.product(b[2])), 'other', b[0], 2, '');
      expect(status).toBe('OUT');
      const landing = await moveIn.run(c, moveInKeys(keys.product(b[0])), 'other', units, epoch as string);
      await moveDone.run(c, moveDoneKeys(keys.product(b[2])), 'other', landing);
      return [...first, ...(await read(buckets.slice(1)))];
    });
    const answer = await buy(url, 'cam', usersOf(1, 3, 1, 'k')[0], 5);
    expect(reads).toBeGreaterThanOrEqual(1);
    // Six units in the product all along (4 of them in bucket 1 after the refill's move):
    // the buyer's five are there.
    expect(answer.body.code).toBeUndefined();
    expect(answer.status).toBe(201);
  });
  it('no SOLD_OUT from a refill that began before this purchase: a unit back in another bucket first is bought, not answered by the shared refill', async () => {
    const prefix = uniquePrefix('r45b-shared');
    const { url, app: nest } = await app(prefix, 'atomic');
    expect((await put(url, 'mug', { stock: 3, buckets: 3 })).status).toBe(200);
    // Every bucket sold by its own buyer: nothing left.
    const sold = [];
    for (let bucket = 0; bucket < 3; bucket++) {
      const answer = await buy(url, 'mug', usersOf(bucket, 3, 1, 'o')[0]);
      expect(answer.status).toBe(201);
      sold.push(answer.body.orderId as string);
    }
    const escrow = nest.get(Escrow);
    // The second refill call (the second buyer's), awaited rather than polled for.
    const refill = escrow.refill.bind(escrow);
    let calls = 0;
    let secondCalled!: () => void;
    const secondRefill = new Promise<void>((r) => (secondCalled = r));
    jest.spyOn(escrow, 'refill').mockImplementation((...args: Parameters<Escrow['refill']>) => {
      if (++calls === 2) secondCalled();
      return refill(...args);
    });
    // The first buyer's refill (bucket 1, one unit) has confirmed every bucket dry, and is
    // slow to answer (a pause, a slow link back).
    const confirm = (escrow as unknown as { confirmed: (...a: unknown[]) => Promise<number | null> }).confirmed.bind(
      escrow,
    );
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let confirmed!: () => void;
    const atConfirmed = new Promise<void>((r) => (confirmed = r));
    jest
      .spyOn(escrow as unknown as { confirmed: (...a: unknown[]) => Promise<number | null> }, 'confirmed')
      .mockImplementationOnce(async (...args: unknown[]) => {
        const still = await confirm(...args);
        confirmed();
        await gate;
        return still;
      });
    const [h1, h2] = usersOf(1, 3, 2, 'h');
    const first = buy(url, 'mug', h1);
    await atConfirmed;
    // Then bucket 2's buyer cancels: the unit is back, in bucket 2, before the second buyer comes.
    expect((await request(url, 'POST', `/api/orders/${sold[2]}/cancel`)).status).toBe(200);
    const second = buy(url, 'mug', h2);
    // The second buyer's purchase found bucket 1 dry and waits for the refill in hand.
    await secondRefill;
    expect(calls).toBe(2);
    const keys = new KeyLayout(prefix);
    expect(await redis.client().get(keys.product('mug~2').stock)).toBe('1');
    release();
    expect((await first).status).toBe(409);
    const answer = await second;
    // The unit was in bucket 2 from before the second purchase began to its end: it is that buyer's.
    expect(answer.body.code).toBeUndefined();
    expect(answer.status).toBe(201);
  });

  it.each(['atomic', 'fenced'])(
    '%s: a sale of the previous version (bare epochs) whose PUT stopped half-way (bucket 2 reset, 0 and 1 not): bucket 2 buyers buy, as before, not 503',
    async (strategy) => {
      const prefix = uniquePrefix(`r45b-legacy-${strategy}`);
      const keys = new KeyLayout(prefix);
      const { url } = await app(prefix, strategy);
      expect((await put(url, 'hat', { stock: 9, buckets: 3 })).status).toBe(200);
      const b = await ids(url, 'hat');
      const c = redis.client();
      // As the version before this change left it: its epochs are bare UUIDs (no '.'),
      // one per sale; its restart reset bucket 2 into a new sale (E2), then stopped before
      // buckets 1 and 0 (a crash; or, in a rolling upgrade, simply not there yet).
      await c.hset(keys.product(b[0]).meta, 'epoch', '1b8f0c3e-0000-4000-8000-00000000e001');
      await c.hset(keys.product(b[1]).meta, 'epoch', '1b8f0c3e-0000-4000-8000-00000000e001');
      await c.hset(keys.product(b[2]).meta, 'epoch', '1b8f0c3e-0000-4000-8000-00000000e002');
      // Past the bucket list's cache (BUCKETS_TRUST_MS).
      await new Promise((r) => setTimeout(r, 1_100));
      // Buyers of buckets 0 and 1 buy in the old sale, as the previous version sold them.
      expect((await buy(url, 'hat', usersOf(0, 3, 1, 'g')[0])).status).toBe(201);
      expect((await buy(url, 'hat', usersOf(1, 3, 1, 'g')[0])).status).toBe(201);
      // A buyer of bucket 2 buys in its sale, as the code before this change sold it (and as
      // 1a03a80 says a restart left half-way by a crash is sold): not 503 BUCKETS_BUSY
      // 'changed', answered at once to every buyer of that bucket until someone PUTs again.
      const answer = await buy(url, 'hat', usersOf(2, 3, 1, 'g')[0]);
      expect(answer.body.code).toBeUndefined();
      expect(answer.status).toBe(201);
    },
  );
});
