import { Escrow } from '../src/orders/escrow';
import { KeyLayout } from '../src/redis/key-layout';
import { moveDone, moveDoneKeys, moveIn, moveInKeys, moveOut, moveOutKeys } from '../src/redis/lua-scripts';
import { uniquePrefix } from './helpers/redis';
import { bucketsOnOneRedis, nothing, readInTurns, splitFirstRead, usersOf } from './helpers/buckets-on-one-redis';

/**
 * Outside review 46 of 2ae206d (a refill's refusal from the first read's total, confirmed
 * by a second read that finds no move, no return (unitsReturned, read before the stock)
 * and no more units in any bucket). Each test fails on 2ae206d. Interleavings are forced,
 * not raced: the app's own Escrow.read() (or its pipeline) is held, for one call, bucket by
 * bucket, and the real routes and scripts run in between.
 */
describe('review 46: refusals from two reads of the buckets', () => {
  const { redis, app, put, buy, cancel, soldOutWhileReturning } = bucketsOnOneRedis();

  it.each(['atomic', 'fenced'])(
    '%s: no SOLD_OUT from reads on both sides of a restart (PUT): the second read does not compare the sale, and a reset raises a stock with no counter moved',
    async (strategy) => {
      const prefix = uniquePrefix(`r46-put-${strategy}`);
      const { url, app: nest } = await app(prefix, strategy);
      // Old sale: two buckets of one unit; H (bucket 0, the buyer's home) sold, K (bucket 1) has its unit.
      expect((await put(url, 'kettle', { stock: 2, buckets: 2, perUserLimit: 5 })).status).toBe(200);
      const [h1, x, y] = usersOf(0, 2, 3, 'h');
      const [k1] = usersOf(1, 2, 1, 'k');
      expect((await buy(url, 'kettle', h1)).status).toBe(201);
      const escrow = nest.get(Escrow);
      const steps: string[] = [];
      let inK = '';
      const act = async (
        what: string,
        answer: Promise<{ status: number; body: Record<string, any> }>,
        status: number,
      ) => {
        const r = await answer;
        steps.push(`${what} ${r.status}`);
        expect(r.status).toBe(status);
        return r.body;
      };
      // The refill's first read: H (0, old sale); then the admin restarts the sale (the same
      // 2 units in 2 buckets: H 1, K 1), and K's unit is sold (k1); then K (0, new sale). Its
      // second read: K (0, as before); then k1 cancels (K 1) and y buys H's unit; then H (0,
      // as before, its unitsReturned '0' in both sales, no move). Every bucket read 0 twice;
      // the product held a unit at every instant (K's before the PUT, then H's, then K's).
      let putting = false;
      readInTurns(
        escrow,
        {
          1: {
            order: [0, 1],
            between: [
              nothing,
              async () => {
                putting = true;
                await act(
                  'PUT',
                  put(url, 'kettle', { stock: 2, buckets: 2, perUserLimit: 5, discardOrders: true }),
                  200,
                ).finally(() => (putting = false));
                inK = (await act('k1 buys K', buy(url, 'kettle', k1), 201)).orderId;
              },
            ],
          },
          2: {
            order: [1, 0],
            between: [
              nothing,
              async () => {
                await act('cancel K', cancel(url, inK), 200);
                await act('y buys H', buy(url, 'kettle', y), 201);
              },
            ],
          },
        },
        () => putting,
      );
      const answer = await buy(url, 'kettle', x);
      expect(steps).toEqual(['PUT 200', 'k1 buys K 201', 'cancel K 200', 'y buys H 201']);
      expect(answer.body.code).toBeUndefined();
      expect(answer.status).toBe(201);
    },
  );

  it.each(['atomic', 'fenced'])(
    "%s: no SOLD_OUT when a move lands between a first read's GET of the stock and its HGETALL of the moves (the version compared is read after the stock)",
    async (strategy) => {
      const prefix = uniquePrefix(`r46-pipe-${strategy}`);
      const keys = new KeyLayout(prefix);
      const { url, app: nest } = await app(prefix, strategy);
      // H (bucket 0, the buyer's home) sold out, K (bucket 1) one unit left: one in the product.
      expect((await put(url, 'toaster', { stock: 4, buckets: 2, perUserLimit: 5 })).status).toBe(200);
      const [h1, h2, x, y] = usersOf(0, 2, 4, 'h');
      const [k1] = usersOf(1, 2, 1, 'k');
      expect((await buy(url, 'toaster', h1)).status).toBe(201);
      expect((await buy(url, 'toaster', h2)).status).toBe(201);
      const inK = (await buy(url, 'toaster', k1)).body.orderId as string;
      const [H, K] = ['toaster', 'toaster~1'];
      const c = redis.client();
      const escrow = nest.get(Escrow);
      const steps: string[] = [];
      // Another instance's refill moves K's unit to H, whole (the real scripts).
      const move = async () => {
        const [status, units, epoch] = await moveOut.run(c, moveOutKeys(keys.product(K)), 'other', H, 1, '');
        expect(status).toBe('OUT');
        const landing = await moveIn.run(c, moveInKeys(keys.product(H)), 'other', units, epoch as string);
        expect(landing).toBe('IN');
        await moveDone.run(c, moveDoneKeys(keys.product(K)), 'other', landing);
        steps.push(`moved ${units} K->H`);
      };
      // The first read: H (its pipeline of reads, not atomic as read() says, its commands
      // one at a time: the move right after its GET of the stock, so its stock is 0 before
      // the landing and its version after it), then K (0, v moved before its read, nothing
      // in flight). The second: K (0), then k1 cancels (K 1) and y buys H's landed unit,
      // then H (0, the version its first read found). The product held a unit at every
      // instant (K's, in flight, H's, then K's again).
      const split = splitFirstRead(escrow, move, async () => {
        steps.push(`cancel K ${(await cancel(url, inK)).status}`);
        steps.push(`y buys H ${(await buy(url, 'toaster', y)).status}`);
      });
      const answer = await buy(url, 'toaster', x);
      split.restore();
      expect(steps).toEqual(['moved 1 K->H', 'cancel K 200', 'y buys H 201']);
      expect(answer.body.code).toBeUndefined();
      expect(answer.status).toBe(201);
    },
  );

  it('a product sold out while units come back and are sold again (returns that go on) is SOLD_OUT, as before, not 503 BUCKETS_BUSY', async () => {
    const prefix = uniquePrefix('r46-busy');
    // Two buckets of one unit, both sold. Before each read of the buckets (at most 200),
    // K's buyer cancels and buys again (an order that expires, its unit sold at once, as
    // on any hot product): every read finds both buckets dry, and the product is dry at
    // each of them.
    const { url, x, steps, reads } = await soldOutWhileReturning(prefix, 'atomic', [1], 200);
    const answer = await buy(url, 'fan', x);
    expect(steps()).toEqual(['cancel 200', 'buy 201']);
    expect(reads.calls()).toBeGreaterThanOrEqual(2);
    expect(answer.body.code).toBe('SOLD_OUT');
    expect(answer.status).toBe(409);
  });

  it('an INSUFFICIENT_STOCK names a count the product held at some instant of the purchase (not a bucket count of before a sale of two)', async () => {
    const prefix = uniquePrefix('r46-count');
    const { url, app: nest } = await app(prefix, 'atomic');
    // H (bucket 0, the buyer's home) 2 units, K (bucket 1) 1: 3 in the product.
    expect((await put(url, 'lamp', { stock: 4, buckets: 2, perUserLimit: 5 })).status).toBe(200);
    const [x, h2] = usersOf(0, 2, 2, 'h');
    const [k1, k2] = usersOf(1, 2, 2, 'k');
    expect((await buy(url, 'lamp', k1)).status).toBe(201);
    const escrow = nest.get(Escrow);
    const steps: string[] = [];
    // The buyer asks 3; H has 2. The refill's first read: H (2), then h2 buys 2 from H (1
    // in the product) and k2 K's unit (0), then K (0). Its second read confirms (no return,
    // no move, no more units). The product held 3, then 1, then 0: never 2.
    readInTurns(escrow, {
      1: {
        order: [0, 1],
        between: [
          nothing,
          async () => {
            steps.push(`h2 buys 2 ${(await buy(url, 'lamp', h2, 2)).status}`);
            steps.push(`k2 buys 1 ${(await buy(url, 'lamp', k2)).status}`);
          },
        ],
      },
    });
    const answer = await buy(url, 'lamp', x, 3);
    expect(steps).toEqual(['h2 buys 2 201', 'k2 buys 1 201']);
    expect(answer.status).toBe(409);
    const left = answer.body.code === 'SOLD_OUT' ? 0 : Number(/has (\d+) left/.exec(answer.body.message)?.[1]);
    expect({ code: answer.body.code, left, heldDuringPurchase: [3, 1, 0].includes(left) }).toEqual({
      code: answer.body.code,
      left,
      heldDuringPurchase: true,
    });
  });
});
