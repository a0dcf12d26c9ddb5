import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { KeyLayout } from '../src/redis/key-layout';
import { REDIS_CLIENT } from '../src/redis/redis.constants';
import { moveDone, moveDoneKeys, moveIn, moveInKeys, moveOut, moveOutKeys } from '../src/redis/lua-scripts';
import { PurchasePath } from '../src/orders/purchases/purchase-path';
import { ProductsService } from '../src/products/products.service';
import { OrderOutcomes } from '../src/orders/order-outcomes';
import { Escrow } from '../src/orders/escrow';
import { pay, request, TestApp } from './helpers/app';
import { uniquePrefix } from './helpers/redis';
import { bucketsOnOneRedis, usersOf } from './helpers/buckets-on-one-redis';

/**
 * Escrow buckets on one Redis (buckets work there too, all on one server): what an
 * outside review of issue 40 found, each test failing on the first version: a DELETE or a
 * PUT changed half-way, a move missed by a refill's read, the per-user limit across a
 * re-listing, GET under OOM, close; and the checks that already held (one bucket's hot
 * path, a skewed crowd under four strategies, an order's afterlife).
 */
describe('escrow buckets on one Redis', () => {
  const { redis, app, put, buy, ids } = bucketsOnOneRedis();

  /**
   * A PUT of `tv` with `stock` (from the service, so the test holds it) paused before its exclusion
   * of bucket `at`, while `during` runs; then released, and awaited.
   */
  async function whilePutPaused(nest: TestApp['app'], at: string, stock: number, during: () => Promise<void>) {
    const path = nest.get(PurchasePath);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let paused!: () => void;
    const reached = new Promise<void>((r) => (paused = r));
    const original = path.exclusive.bind(path);
    let gated = false;
    const spy = jest.spyOn(path, 'exclusive').mockImplementation(async (id: string, fn: () => Promise<unknown>) => {
      if (id === at && !gated) {
        gated = true;
        paused();
        await gate;
      }
      return original(id, fn);
    });
    const first = nest.get(ProductsService).startSale('tv', stock, 1, { discardOrders: true });
    await reached;
    try {
      await during();
    } finally {
      release();
    }
    await first;
    spy.mockRestore();
  }

  it('a DELETE refused (409) changes nothing: no bucket of a live sale is deleted', async () => {
    const prefix = uniquePrefix('r40-del');
    const { url } = await app(prefix);
    expect((await put(url, 'phone', { stock: 30, buckets: 3 })).status).toBe(200);
    expect((await buy(url, 'phone', usersOf(0, 3, 1)[0])).status).toBe(201);
    const refused = await request(url, 'DELETE', '/api/products/phone', { admin: true });
    expect(refused.status).toBe(409); // RESERVATIONS_OPEN or ORDERS_UNSETTLED: bucket 0 has the order
    // Nothing changed: the sale still has its 29 units, and a buyer of bucket 1 buys.
    const stock = (await request(url, 'GET', '/api/products/phone')).body.stock;
    const other = await buy(url, 'phone', usersOf(1, 3, 1, 'v')[0]);
    expect({ refused: refused.body.code, stock, other: other.status === 201 ? 201 : other.body.code }).toEqual({
      refused: refused.body.code,
      stock: 29,
      other: 201,
    });
  });

  it("on a bucketed product an Idempotency-Key is the buyer's: replayed for them, another request for another userId", async () => {
    const prefix = uniquePrefix('r40-idem');
    const { url } = await app(prefix);
    expect((await put(url, 'many', { stock: 10, buckets: 3 })).status).toBe(200);
    const [a] = usersOf(0, 3, 1, 'a');
    const [b] = usersOf(1, 3, 1, 'b');
    const first = await buy(url, 'many', a, 1, { 'idempotency-key': 'k-2' });
    expect(first.status).toBe(201);
    const again = await buy(url, 'many', a, 1, { 'idempotency-key': 'k-2' });
    expect([again.status, again.headers.get('idempotent-replayed'), again.body.orderId]).toEqual([
      201,
      'true',
      first.body.orderId,
    ]);
    // Another buyer's request under the same key (their home is another bucket): theirs.
    const other = await buy(url, 'many', b, 1, { 'idempotency-key': 'k-2' });
    expect(other.status).toBe(201);
    expect(other.body.orderId).not.toBe(first.body.orderId);
  });

  it('a PUT paused half-way while another PUT runs leaves every bucket in one sale (one epoch, one stock)', async () => {
    const prefix = uniquePrefix('r40-put');
    const keys = new KeyLayout(prefix);
    const { url, app: nest } = await app(prefix);
    expect((await put(url, 'tv', { stock: 9, buckets: 3 })).status).toBe(200);
    const bucketIds = await ids(url, 'tv');
    // PUT A pauses (a GC pause, a slow link) before its reset of bucket 1; PUT B is sent meanwhile.
    await whilePutPaused(nest, bucketIds[1], 10, async () => {
      // One admin change of a product at a time: B waits for A's, then is refused, nothing changed.
      const second = await put(url, 'tv', { stock: 20, discardOrders: true });
      expect([second.status, second.body.code]).toEqual([503, 'LOCK_TIMEOUT']);
    });
    const epochs = await Promise.all(bucketIds.map((id) => redis.client().hget(keys.product(id).meta, 'epoch')));
    const product = (await request(url, 'GET', '/api/products/tv')).body;
    expect({ epochs: new Set(epochs).size, initialStockIsOnePut: [10, 20].includes(product.initialStock) }).toEqual({
      epochs: 1,
      initialStockIsOnePut: true,
    });
    expect(product.initialStock).toBe(10);
  }, 30_000);

  it('a PUT paused half-way, another refused meanwhile: one epoch, every buyer of bucket 0 served while units remain', async () => {
    const prefix = uniquePrefix('r40-put2');
    const keys = new KeyLayout(prefix);
    const { url, app: nest } = await app(prefix);
    expect((await put(url, 'tv', { stock: 9, buckets: 3 })).status).toBe(200);
    const bucketIds = await ids(url, 'tv');
    await whilePutPaused(nest, bucketIds[1], 9, async () => {
      expect((await put(url, 'tv', { stock: 9, discardOrders: true })).status).toBe(503);
    });
    const c = redis.client();
    const epochs = await Promise.all(bucketIds.map((id) => c.hget(keys.product(id).meta, 'epoch')));
    expect(new Set(epochs).size).toBe(1);
    // 9 units, 3 per bucket, no orders. Every buyer homed in bucket 0 should get one until all 9 are sold.
    const answers = [];
    for (const u of usersOf(0, 3, 10, 'p')) {
      const r = await buy(url, 'tv', u);
      answers.push(r.status === 201 ? 201 : r.body.code);
    }
    expect(answers).toEqual([201, 201, 201, 201, 201, 201, 201, 201, 201, 'SOLD_OUT']);
  }, 30_000);

  it('SOLD_OUT only when no unit is free: a move landing during the refill read is not missed', async () => {
    const prefix = uniquePrefix('r40-torn');
    const keys = new KeyLayout(prefix);
    const { url, app: nest } = await app(prefix, 'atomic');
    expect((await put(url, 'pen', { stock: 3, buckets: 3 })).status).toBe(200);
    const b = await ids(url, 'pen');
    // Buckets 0 and 1 sold by their own buyers: one unit left, in bucket 2.
    expect((await buy(url, 'pen', usersOf(0, 3, 1, 'o')[0])).status).toBe(201);
    expect((await buy(url, 'pen', usersOf(1, 3, 1, 'o')[0])).status).toBe(201);
    const c = redis.client();
    const appRedis = nest.get<Redis>(REDIS_CLIENT);
    const stock2 = keys.product(b[2]).stock;
    const pipeline = appRedis.pipeline.bind(appRedis);
    let armed = true;
    // The refill's read of bucket 2 reaches Redis a little after its read of bucket 1 (another
    // shard, another link): in between, another instance moves bucket 2's unit to bucket 1.
    jest.spyOn(appRedis, 'pipeline').mockImplementation(((...args: Parameters<Redis['pipeline']>) => {
      const p = pipeline(...args);
      const exec = p.exec.bind(p);
      p.exec = (async (...e: Parameters<typeof exec>) => {
        const queued = (p as unknown as { _queue: { args: unknown[] }[] })._queue;
        if (armed && queued.some((cmd) => cmd.args[0] === stock2)) {
          armed = false;
          await sleep(50);
          const [, units, epoch] = await moveOut.run(c, moveOutKeys(keys.product(b[2])), 'other', b[1], 1, '');
          const landing = await moveIn.run(c, moveInKeys(keys.product(b[1])), 'other', units, epoch as string);
          await moveDone.run(c, moveDoneKeys(keys.product(b[2])), 'other', landing);
        }
        return exec(...e);
      }) as typeof p.exec;
      return p;
    }) as Redis['pipeline']);
    const answer = await buy(url, 'pen', usersOf(0, 3, 2, 'o')[1]);
    expect(armed).toBe(false);
    // The unit was free (in bucket 2, in flight, in bucket 1) during the whole request: it is this buyer's.
    expect(answer.body.code).toBeUndefined();
    expect(answer.status).toBe(201);
    expect(await Promise.all(b.map((id) => c.get(keys.product(id).stock)))).toEqual(['0', '0', '0']);
  });

  it('no SOLD_OUT from a refill whose reads units kept moving past: the buyer buys the unit that was there throughout', async () => {
    const prefix = uniquePrefix('r45-unconfirmed');
    const keys = new KeyLayout(prefix);
    const { url, app: nest } = await app(prefix, 'atomic');
    expect((await put(url, 'pad', { stock: 3, buckets: 3 })).status).toBe(200);
    const b = await ids(url, 'pad');
    // Buckets 0 and 1 sold by their own buyers: one unit left, in bucket 2.
    expect((await buy(url, 'pad', usersOf(0, 3, 1, 'p')[0])).status).toBe(201);
    expect((await buy(url, 'pad', usersOf(1, 3, 1, 'p')[0])).status).toBe(201);
    const c = redis.client();
    const escrow = nest.get(Escrow);
    const read = escrow.read.bind(escrow);
    let at = 2;
    let reads = 0;
    // Another instance keeps moving the unit between buckets 1 and 2 with the real move
    // scripts: before each of the refill's first three reads it leaves a move in flight (the
    // refill lands it, and reads again); during the fourth, it moves the unit whole from
    // bucket 1, not yet read, to bucket 0, already read (a read of three shards is three
    // reads). The unit is in some bucket, or in flight, all along.
    jest.spyOn(escrow, 'read').mockImplementation(async (buckets: readonly string[]) => {
      reads++;
      if (reads <= 3) {
        const to = at === 2 ? 1 : 2;
        const [status] = await moveOut.run(c, moveOutKeys(keys.product(b[at])), `m${reads}`, b[to], 1, '');
        expect(status).toBe('OUT');
        at = to;
      }
      if (reads !== 4) return read(buckets);
      const first = await read(buckets.slice(0, 1));
      const [, units, epoch] = await moveOut.run(c, moveOutKeys(keys.product(b[at])), 'm4', b[0], 1, '');
      const landing = await moveIn.run(c, moveInKeys(keys.product(b[0])), 'm4', units, epoch as string);
      await moveDone.run(c, moveDoneKeys(keys.product(b[at])), 'm4', landing);
      return [...first, ...(await read(buckets.slice(1)))];
    });
    const answer = await buy(url, 'pad', usersOf(0, 3, 2, 'p')[1]);
    expect(reads).toBeGreaterThanOrEqual(5);
    expect(answer.body.code).toBeUndefined();
    expect(answer.status).toBe(201);
    expect(await Promise.all(b.map((id) => c.get(keys.product(id).stock)))).toEqual(['0', '0', '0']);
  });

  it('per-user limit across instances right after DELETE + PUT with buckets (a bucket list cached for 1 s)', async () => {
    const prefix = uniquePrefix('r40-stale');
    const a = await app(prefix);
    const b = await app(prefix);
    expect((await put(a.url, 'cap', { stock: 30 })).status).toBe(200);
    // Instance B reads the product's bucket list (one bucket) with a purchase.
    expect((await buy(b.url, 'cap', 'warm')).status).toBe(201);
    expect((await request(a.url, 'DELETE', '/api/products/cap?discardOrders=true', { admin: true })).status).toBe(200);
    expect((await put(a.url, 'cap', { stock: 30, buckets: 3 })).status).toBe(200);
    const [y] = usersOf(1, 3, 1, 'y');
    const viaB = await buy(b.url, 'cap', y);
    const viaA = await buy(a.url, 'cap', y);
    // perUserLimit 1: one of the two must be LIMIT_REACHED.
    expect([viaB.status, viaA.status].sort()).toEqual([201, 409]);
  }, 30_000);

  /**
   * A purchase of `id` by `userId` that reads its bucket list, then is held (as one that
   * waited for a lock, or paused, would be: the app's Escrow.home() wrapped for that one
   * call) while the product is deleted and put again with `json`; its answer.
   */
  async function boughtAcrossDeleteAndPut(a: TestApp, id: string, userId: string, json: Record<string, unknown>) {
    const escrow = a.app.get(Escrow);
    const original = escrow.home.bind(escrow);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let chose!: () => void;
    const chosen = new Promise<void>((r) => (chose = r));
    const spy = jest.spyOn(escrow, 'home').mockImplementationOnce(async (productId: string, user: string) => {
      const home = await original(productId, user);
      chose();
      await gate;
      return home;
    });
    try {
      const stale = buy(a.url, id, userId);
      await chosen;
      expect((await request(a.url, 'DELETE', `/api/products/${id}?discardOrders=true`, { admin: true })).status).toBe(
        200,
      );
      expect((await put(a.url, id, json)).status).toBe(200);
      release();
      return await stale;
    } finally {
      release();
      spy.mockRestore();
    }
  }

  it.each(['fenced', 'lock', 'atomic', 'optimistic'])(
    '%s: a purchase that chose its bucket from the list of the last sale (one bucket) buys in its home bucket of the new one (3)',
    async (strategy) => {
      const prefix = uniquePrefix(`r45-list-${strategy}`);
      const keys = new KeyLayout(prefix);
      const a = await app(prefix, strategy);
      expect((await put(a.url, 'flip', { stock: 30 })).status).toBe(200);
      const [y] = usersOf(1, 3, 1, 'y');
      const first = await boughtAcrossDeleteAndPut(a, 'flip', y, { stock: 30, buckets: 3 });
      expect(first.body.code).toBeUndefined();
      expect(first.status).toBe(201);
      // Its unit was counted in y's home bucket of the new sale (bucket 1), not in bucket 0.
      const b = await ids(a.url, 'flip');
      const c = a.app.get<Redis>(REDIS_CLIENT);
      expect(await Promise.all(b.map((id) => c.hget(keys.product(id).buyers, y)))).toEqual([null, '1', null]);
      // perUserLimit 1: y's second purchase is refused.
      expect((await buy(a.url, 'flip', y)).body.code).toBe('LIMIT_REACHED');
    },
  );

  it.each(['fenced', 'atomic'])(
    '%s: a purchase that chose a bucket of the last sale (3 buckets), gone with its DELETE, buys in the new one (1 bucket)',
    async (strategy) => {
      const prefix = uniquePrefix(`r45-gone-${strategy}`);
      const keys = new KeyLayout(prefix);
      const a = await app(prefix, strategy);
      expect((await put(a.url, 'flop', { stock: 30, buckets: 3 })).status).toBe(200);
      const [y] = usersOf(2, 3, 1, 'y');
      const first = await boughtAcrossDeleteAndPut(a, 'flop', y, { stock: 30 });
      // Not UNKNOWN_PRODUCT for a product that is on sale: bought in its one bucket.
      expect(first.body.code).toBeUndefined();
      expect(first.status).toBe(201);
      const c = a.app.get<Redis>(REDIS_CLIENT);
      expect(await c.hget(keys.product('flop').buyers, y)).toBe('1');
      expect((await buy(a.url, 'flop', y)).body.code).toBe('LIMIT_REACHED');
    },
  );

  it("fenced: a purchase that chose a bucket of a sale listed before lists were named (3 buckets, list ''), gone with its DELETE, buys in the new one (1 bucket, list '')", async () => {
    const prefix = uniquePrefix('r45-bare');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix, 'fenced');
    expect((await put(a.url, 'old', { stock: 30, buckets: 3 })).status).toBe(200);
    // As the version before lists left its epochs: bare UUIDs, list ''.
    const c = a.app.get<Redis>(REDIS_CLIENT);
    for (const id of await ids(a.url, 'old'))
      await c.hset(keys.product(id).meta, 'epoch', 'bare-epoch-of-the-last-version');
    // The list read since (by GET .../buckets) is of the real epoch: read again, as a list of that version.
    a.app.get(Escrow).forget('old');
    const [y] = usersOf(2, 3, 1, 'y');
    const first = await boughtAcrossDeleteAndPut(a, 'old', y, { stock: 30 });
    // Both lists are named '', but they are not the same buckets: read again, bought in bucket 0.
    expect(first.body.code).toBeUndefined();
    expect(first.status).toBe(201);
    expect(await c.hget(keys.product('old').buyers, y)).toBe('1');
  });

  it('GET /api/products/:id of a bucketed product is answered while Redis refuses writes for memory, as for one bucket', async () => {
    const prefix = uniquePrefix('r40-oom');
    const { url } = await app(prefix);
    expect((await put(url, 'one', { stock: 6 })).status).toBe(200);
    expect((await put(url, 'three', { stock: 6, buckets: 3 })).status).toBe(200);
    const admin = redis.client();
    await admin.config('SET', 'maxmemory', '1');
    try {
      const one = await request(url, 'GET', '/api/products/one');
      const three = await request(url, 'GET', '/api/products/three');
      expect({ one: one.status, three: three.status === 200 ? 200 : three.body.code }).toEqual({
        one: 200,
        three: 200,
      });
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
  });

  it('one bucket: a purchase costs no more Redis commands than before buckets (no list read per purchase)', async () => {
    const prefix = uniquePrefix('r40-cost');
    const { url, app: nest } = await app(prefix);
    expect((await put(url, 'hot', { stock: 500 })).status).toBe(200);
    const appRedis = nest.get<Redis>(REDIS_CLIENT);
    await buy(url, 'hot', 'w0');
    // The list is read with HMGET of bucket 0's meta (Escrow.list()); the sale's own reads
    // go in a pipeline or a script, never through the client's hmget.
    const hmget = jest.spyOn(appRedis, 'hmget');
    const started = performance.now();
    for (let i = 1; i <= 50; i++) await buy(url, 'hot', `w${i}`);
    const ms = performance.now() - started;
    // BUCKETS_TRUST_MS (1 s): one re-read per second of purchases at most.
    expect(hmget.mock.calls.length).toBeLessThanOrEqual(Math.ceil(ms / 1000) + 1);
  });

  it.each(['fenced', 'atomic', 'lock', 'optimistic'])(
    '%s: 90%% of a crowd homed in one bucket: every unit sold, no BUCKETS_BUSY while units remain',
    async (strategy) => {
      const prefix = uniquePrefix(`r40-skew-${strategy}`);
      const { url } = await app(prefix, strategy);
      expect((await put(url, 'tv', { stock: 300, buckets: 3 })).status).toBe(200);
      const users = [...usersOf(0, 3, 540, 's'), ...usersOf(1, 3, 30, 't'), ...usersOf(2, 3, 30, 'r')];
      const answers = await Promise.all(users.map((u) => buy(url, 'tv', u)));
      const codes: Record<string, number> = {};
      for (const a of answers) {
        const c = a.status === 201 ? '201' : String(a.body.code);
        codes[c] = (codes[c] ?? 0) + 1;
      }
      const product = (await request(url, 'GET', '/api/products/tv')).body;
      expect({ codes, stock: product.stock }).toEqual({ codes: { '201': 300, SOLD_OUT: 300 }, stock: 0 });
    },
    120_000,
  );

  it('a bucket order: GET, pay, cancel name the product; a cancelled unit is back for every buyer', async () => {
    const prefix = uniquePrefix('r40-after');
    const { url } = await app(prefix);
    expect((await put(url, 'bag', { stock: 3, buckets: 3 })).status).toBe(200);
    const [u2, v2] = usersOf(2, 3, 2, 'z');
    const first = await buy(url, 'bag', u2);
    const second = await buy(url, 'bag', v2);
    expect(first.body.orderId).toMatch(/^bag~\d+\./);
    const got = await request(url, 'GET', `/api/orders/${first.body.orderId}`);
    expect(got.body).toMatchObject({ productId: 'bag', status: 'reserved' });
    expect((await pay(url, first.body.orderId, 'pay-1')).status).toBe(200);
    const cancelled = await request(url, 'POST', `/api/orders/${second.body.orderId}/cancel`);
    expect(cancelled.status).toBe(200);
    expect((await request(url, 'GET', '/api/products/bag')).body).toMatchObject({ stock: 2, sold: 1 });
    // Buyers of bucket 0 buy both units left (one of them returned to bucket 2).
    const late = [];
    for (const u of usersOf(0, 3, 3, 'late')) late.push((await buy(url, 'bag', u)).status);
    expect(late).toEqual([201, 201, 409]);
  });

  it('POST /close: nothing is sold after the endsAt it answers, in any bucket', async () => {
    const prefix = uniquePrefix('r40-close');
    const { url, app: nest } = await app(prefix);
    expect((await put(url, 'cap', { stock: 30, buckets: 3 })).status).toBe(200);
    // A reservation in bucket 0: the close cancels it before it closes bucket 1 and 2.
    expect((await buy(url, 'cap', usersOf(0, 3, 1, 'c')[0])).status).toBe(201);
    const outcomes = nest.get(OrderOutcomes);
    const release = outcomes.release.bind(outcomes);
    let go!: () => void;
    const gate = new Promise<void>((r) => (go = r));
    let paused!: () => void;
    const reached = new Promise<void>((r) => (paused = r));
    jest.spyOn(outcomes, 'release').mockImplementation(async (orderId: string) => {
      paused();
      await gate;
      return release(orderId);
    });
    const closing = request(url, 'POST', '/api/products/cap/close', { admin: true });
    await reached;
    const late = await buy(url, 'cap', usersOf(2, 3, 1, 'd')[0]);
    go();
    const closed = await closing;
    expect(closed.status).toBe(200);
    expect({ late: late.status === 201 ? 201 : late.body.code, endsAt: closed.body.product.endsAt !== null }).toEqual({
      late: 'SALE_ENDED',
      endsAt: true,
    });
  });
});
