import { Escrow } from '../src/orders/escrow';
import { KeyLayout } from '../src/redis/key-layout';
import { uniquePrefix } from './helpers/redis';
import { bucketsOnOneRedis, nothing, readInTurns, usersOf } from './helpers/buckets-on-one-redis';

/**
 * A refill's refusal (SOLD_OUT, INSUFFICIENT_STOCK) must hold at some instant of the
 * purchase: the units in every bucket at once. Its reads are one bucket after another,
 * so a unit can come back (a cancel, an expiry) to a bucket already read while another
 * sells. Each test reads the buckets in one order (the app's own Escrow.read(), for one
 * call, one bucket at a time) and returns and sells between the reads, through the real
 * routes; the product has at least one unit throughout.
 */
describe('escrow buckets: a refill refuses only what held at one instant', () => {
  const { redis, app, put, buy, cancel, returnsBetweenReads, soldOutWhileReturning } = bucketsOnOneRedis();

  it.each(['atomic', 'fenced'])(
    '%s: no SOLD_OUT when a unit came back to a bucket between its two reads, and was sold again',
    async (strategy) => {
      const { url, x, done } = await returnsBetweenReads(strategy, uniquePrefix(`refusal-back-${strategy}`));
      const answer = await buy(url, 'lamp', x);
      done();
      expect(answer.body.code).toBeUndefined();
      expect(answer.status).toBe(201);
    },
  );

  it("the waiting room's count (Escrow.left()) is not 0 when a unit came back to a bucket between its two reads, and was sold again", async () => {
    const prefix = uniquePrefix('refusal-left');
    const { escrow, done } = await returnsBetweenReads('fenced', prefix);
    const meta = new KeyLayout(prefix).product('lamp').meta;
    const left = await escrow.left('lamp', async () => (await redis.client().hget(meta, 'epoch')) ?? '');
    done();
    // 0 would be the door's SOLD_OUT to every join (queue-5.lua): the product held a unit throughout.
    expect(left).toEqual({ units: 1, moving: false });
  });

  it.each(['atomic', 'fenced'])(
    '%s: no SOLD_OUT from a second read that found every bucket dry when the first found a unit',
    async (strategy) => {
      const prefix = uniquePrefix(`refusal-short-${strategy}`);
      const { url, app: nest } = await app(prefix, strategy);
      // Two buckets of one unit: B's sold, A's left. The buyer (home A) asks for 2.
      expect((await put(url, 'desk', { stock: 2, buckets: 2, perUserLimit: 5 })).status).toBe(200);
      const [x, z] = usersOf(0, 2, 2, 'd');
      const [b1] = usersOf(1, 2, 1, 'e');
      const inB = (await buy(url, 'desk', b1)).body.orderId;
      const escrow = nest.get(Escrow);
      const steps: string[] = [];
      // The refill's second read: B first (0, as before), then B's unit comes back and A's
      // is sold (z), then A (0, one sale less than the first read found). Each bucket held
      // its count between its reads but the two reads add up to no instant's: the product
      // held a unit at every instant, fewer than 2: INSUFFICIENT_STOCK, not SOLD_OUT.
      readInTurns(escrow, {
        2: {
          order: [1, 0],
          between: [
            nothing,
            async () => {
              const back = await cancel(url, inB);
              const sold = await buy(url, 'desk', z);
              steps.push(`cancel B ${back.status}`, `z buys A ${sold.status}`);
            },
          ],
        },
      });
      const answer = await buy(url, 'desk', x, 2);
      expect(steps).toEqual(['cancel B 200', 'z buys A 201']);
      expect(answer.status).toBe(409);
      expect(answer.body.code).toBe('INSUFFICIENT_STOCK');
    },
  );

  it("the waiting room's count of a product sold out while one bucket's units come back and sell again is 0, not BUCKETS_BUSY", async () => {
    const prefix = uniquePrefix('refusal-left-churn');
    // Before each read (at most 50), K's buyer cancels and buys again.
    const { escrow, steps } = await soldOutWhileReturning(prefix, 'atomic', [1], 50);
    const meta = new KeyLayout(prefix).product('fan').meta;
    const left = await escrow.left('fan', async () => (await redis.client().hget(meta, 'epoch')) ?? '');
    expect(steps()).toEqual(['cancel 200', 'buy 201']);
    expect(left).toEqual({ units: 0, moving: false });
  });

  it("the waiting room's count while units keep coming back to both buckets between every read: 503 BUCKETS_BUSY after two rounds, never a 0 no read can show", async () => {
    const prefix = uniquePrefix('refusal-left-both');
    // Before each read (at most 50), the buyer of each bucket's unit cancels and buys again.
    const { escrow, steps, reads } = await soldOutWhileReturning(prefix, 'atomic', [0, 1], 50);
    const meta = new KeyLayout(prefix).product('fan').meta;
    const left = escrow.left('fan', async () => (await redis.client().hget(meta, 'epoch')) ?? '');
    await expect(left).rejects.toMatchObject({ code: 'BUCKETS_BUSY', status: 503 });
    await expect(left).rejects.toThrow(/units kept coming back/);
    expect(steps()).toEqual(['cancel 200', 'buy 201']);
    expect(reads.calls()).toBe(4);
  });
});
