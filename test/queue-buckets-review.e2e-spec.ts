import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster } from 'ioredis';
import { WaitingRoom } from '../src/door/waiting-room';
import { Escrow } from '../src/orders/escrow';
import { Idempotency } from '../src/orders/idempotency';
import { KeyLayout } from '../src/redis/key-layout';
import { homeBucket } from '../src/sale/buckets';
import { moveDone, moveDoneKeys, moveIn, moveInKeys, moveOut, moveOutKeys } from '../src/redis/lua-scripts';
import { request, TestApp } from './helpers/app';
import { homedIn, queueOverBuckets, until } from './helpers/queue-buckets';
import { uniquePrefix, useTestCluster } from './helpers/redis';

/**
 * An outside review of the waiting room over escrow buckets (e2cdd9e): each test failed there.
 * The interleavings are forced, not raced: the app's own Escrow.read() is wrapped so
 * that its per-bucket reads answer in one order Promise.all allows, with real scripts
 * run on the real cluster between them.
 */
describe('the waiting room over escrow buckets, under interleavings an outside review forced', () => {
  const shared = useTestCluster(3, 0);
  let client: Cluster;
  beforeAll(() => {
    client = shared.client;
  });

  const { app, put, join, buyWith, bucketIds, stocks, countsOf } = queueOverBuckets(shared);

  /** Forgets the counts the app's waiting room keeps (COUNT_TRUST_MS): its next join or read counts afresh. */
  const forgetCounts = (a: TestApp) => countsOf(a).clear();

  /**
   * Wraps the app's Escrow.read() once: `between` runs after the first call read `early`
   * buckets and before it reads the rest. The counts its waiting room keeps are
   * forgotten first, so the next join counts afresh.
   */
  function interleaveOnce(a: TestApp, early: number[], between: () => Promise<void>): void {
    forgetCounts(a);
    const escrow = a.app.get(Escrow);
    const original = escrow.read.bind(escrow);
    let armed = true;
    (escrow as unknown as { read: typeof original }).read = async (buckets) => {
      if (!armed || buckets.length !== 3) return original(buckets);
      armed = false;
      const first = await original(early.map((i) => buckets[i]));
      await between();
      const rest = buckets.map((_, i) => i).filter((i) => !early.includes(i));
      const later = await original(rest.map((i) => buckets[i]));
      const all = new Array(buckets.length);
      early.forEach((i, j) => (all[i] = first[j]));
      rest.forEach((i, j) => (all[i] = later[j]));
      return all;
    };
  }

  it("a move completed between a join's reads of two buckets is not counted twice: 3 passes for 3 units", async () => {
    const prefix = uniquePrefix('r44-move');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    expect((await put(a.url, 'fan', { stock: 3, buckets: 3, queue: { admitPerSecond: 100 } })).status).toBe(200);
    const ids = await bucketIds(a.url, 'fan');
    const states: string[] = [];
    for (const u of ['f0', 'f1', 'f2', 'f3']) states.push((await join(a.url, 'fan', u)).body.state);
    expect(states).toEqual(['admitted', 'admitted', 'admitted', 'waiting']);
    // The next count's reads: bucket 1's pipeline answers first, then a whole move of its
    // unit to bucket 0 (out, in, closed: nothing in flight), then buckets 0 and 2 answer.
    interleaveOnce(a, [1], async () => {
      const [status, units, epoch] = await moveOut.run(client, moveOutKeys(keys.product(ids[1])), 'm1', ids[0], 1, '');
      expect(status).toBe('OUT');
      const landing = await moveIn.run(client, moveInKeys(keys.product(ids[0])), 'm1', units, epoch as string);
      expect(landing).toBe('IN');
      await moveDone.run(client, moveDoneKeys(keys.product(ids[1])), 'm1', landing);
    });
    const f4 = await join(a.url, 'fan', 'f4');
    expect(await stocks(keys, ids)).toEqual([2, 0, 1]);
    // Three units, three passes outstanding: f3 must still wait.
    expect(await client.zcard(keys.product('fan').admitted)).toBe(3);
    expect(f4.body.state).toBe('waiting');
  });

  it('a used pass counts the units it bought (perUserLimit 2): no pass admitted with every bucket empty', async () => {
    const prefix = uniquePrefix('r44-units');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    expect(
      (await put(a.url, 'duo', { stock: 4, buckets: 3, perUserLimit: 2, queue: { admitPerSecond: 100 } })).status,
    ).toBe(200);
    const ids = await bucketIds(a.url, 'duo');
    const x1 = await join(a.url, 'duo', 'x1');
    const x2 = await join(a.url, 'duo', 'x2');
    expect([x1.body.state, x2.body.state]).toEqual(['admitted', 'admitted']);
    // x3's join counts the buckets (4 units, usedAt 0); before its script runs, both
    // passes buy their 2 units each and are marked used (queueUsed 2).
    interleaveOnce(a, [0, 1, 2], async () => {
      expect((await buyWith(a.url, 'duo', 'x1', x1.body.pass, 2)).status).toBe(201);
      expect((await buyWith(a.url, 'duo', 'x2', x2.body.pass, 2)).status).toBe(201);
      await until(async () => (await client.hget(keys.product('duo').meta, 'queueUsed')) === '2');
    });
    const x3 = await join(a.url, 'duo', 'x3');
    expect(await stocks(keys, ids)).toEqual([0, 0, 0]);
    // Nothing left in any bucket: no pass may be outstanding.
    expect(x3.body.state).not.toBe('admitted');
    expect(await client.zcard(keys.product('duo').admitted)).toBe(0);
  });

  it("a one-bucket product's pass purchase writes no y:<pass> and no queueUsed (its queue as before buckets had one)", async () => {
    const prefix = uniquePrefix('r44-one');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    expect((await put(a.url, 'solo', { stock: 2, queue: { admitPerSecond: 100 } })).status).toBe(200);
    const t = await join(a.url, 'solo', 's1');
    expect(t.body.state).toBe('admitted');
    expect((await buyWith(a.url, 'solo', 's1', t.body.pass)).status).toBe(201);
    const k = keys.product('solo');
    await until(async () => (await client.zcard(k.admitted)) === 0);
    expect(await client.zcard(k.admitted)).toBe(0);
    await sleep(100);
    // Its outcome is in its own idempotency hash, which queue-5.lua reads: a used mark
    // is a write per purchase and a field per unit sold that the product never needed.
    expect(await client.hexists(k.queue, `y:${t.body.pass}`)).toBe(0);
    expect(await client.hget(k.meta, 'queueUsed')).toBeNull();
  });

  it("a pass's used() mark landing after DELETE recreates no key and re-lists nothing", async () => {
    const prefix = uniquePrefix('r44-del');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    expect((await put(a.url, 'gone', { stock: 3, buckets: 3, queue: { admitPerSecond: 100 } })).status).toBe(200);
    const t = await join(a.url, 'gone', 'g1');
    expect(t.body.state).toBe('admitted');
    expect((await buyWith(a.url, 'gone', 'g1', t.body.pass)).status).toBe(201);
    const k = keys.product('gone');
    await until(async () => (await client.zcard(k.admitted)) === 0);
    // The DELETE deletes every bucket's keys, then waits BUCKETS_TRUST_MS before it unlists
    // the product. Meanwhile a purchase's fire-and-forget used() lands (it is sent after
    // the purchase's exclusion is released, on bucket 0's shard, whatever bucket it bought in:
    // a replay's, or one queued behind a reconnect).
    const deleting = request(a.url, 'DELETE', '/api/products/gone?discardOrders=true', { admin: true });
    await until(async () => (await client.exists(k.meta)) === 0);
    expect(await client.exists(k.meta)).toBe(0);
    await a.app.get(WaitingRoom).used('gone', t.body.pass, 1, true);
    expect((await deleting).status).toBe(200);
    // Before e2cdd9e used() was a ZREM, which creates nothing. Now: keys of no product, for good.
    expect(await client.sismember(keys.products, 'gone')).toBe(0);
    expect(await client.exists(k.meta, k.queue)).toBe(0);
  });

  it('a pass of the last sale, its record read from bucket 0 before a PUT again, buys nothing in the new one', async () => {
    const prefix = uniquePrefix('r44-reset');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    const sale = { stock: 3, buckets: 3, queue: { admitPerSecond: 100 } };
    expect((await put(a.url, 'rerun', sale)).status).toBe(200);
    let user = 'r0';
    for (let i = 1; homeBucket(user, 3) === 0; i++) user = `r${i}`;
    const t = await join(a.url, 'rerun', user);
    expect(t.body.state).toBe('admitted');
    // The purchase reads the pass's record from bucket 0 (src/orders/idempotency.ts), then
    // claims in the home bucket. Between the two, the sale is started again (PUT: a new
    // queue, no pass issued yet, every bucket reset).
    // (Its client is wrapped for the one call: the app's own, the reset forced between.)
    // (Its read of the record is wrapped for the one call: the app's own, the reset forced after it.)
    const idempotency = a.app.get(Idempotency) as unknown as {
      passRecord: (productId: string, pass: string) => Promise<[string, string]>;
    };
    const read = idempotency.passRecord.bind(idempotency);
    let armed = true;
    idempotency.passRecord = async (productId, pass) => {
      const record = await read(productId, pass);
      if (armed && pass === t.body.pass) {
        armed = false;
        expect((await put(a.url, 'rerun', sale)).status).toBe(200);
      }
      return record;
    };
    const bought = await buyWith(a.url, 'rerun', user, t.body.pass);
    idempotency.passRecord = read;
    expect(armed).toBe(false);
    // The new sale issued no pass: its queue must refuse this one.
    expect(await client.hexists(keys.product('rerun').queue, `x:${t.body.pass}`)).toBe(0);
    expect(bought.body.code).toBe('ADMISSION_INVALID');
  });

  it("a count begun before a PUT again is counted afresh: the new sale's queue admits 3 passes for 3 units", async () => {
    const prefix = uniquePrefix('r44-usedat');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    const sale = { stock: 3, buckets: 3, queue: { admitPerSecond: 100 }, discardOrders: true };
    expect((await put(a.url, 'again', sale)).status).toBe(200);
    const k = keys.product('again');
    // The first sale: three passes, each used (queueUsed 3).
    for (const u of ['o1', 'o2', 'o3']) {
      const t = await join(a.url, 'again', u);
      expect(t.body.state).toBe('admitted');
      expect((await buyWith(a.url, 'again', u, t.body.pass)).status).toBe(201);
    }
    await until(async () => (await client.hget(k.meta, 'queueUsed')) === '3');
    expect(await client.hget(k.meta, 'queueUsed')).toBe('3');
    // n5's join reads usedAt (3), then, before it reads any bucket, the sale is started
    // again (queueUsed gone) and its first buyers join: three admitted, n4 waits.
    interleaveOnce(a, [], async () => {
      expect((await put(a.url, 'again', sale)).status).toBe(200);
      // These joins count for themselves (n5's count, held here, would hold them too).
      forgetCounts(a);
      const states: string[] = [];
      for (const u of ['n1', 'n2', 'n3', 'n4']) states.push((await join(a.url, 'again', u)).body.state);
      expect(states).toEqual(['admitted', 'admitted', 'admitted', 'waiting']);
    });
    const n5 = await join(a.url, 'again', 'n5');
    expect(n5.status).toBe(202);
    // Three units in the new sale: three passes at most.
    expect(await client.zcard(k.admitted)).toBe(3);
    expect(n5.body.state).toBe('waiting');
  });

  it("a count kept from before the request with nothing left to serve is counted afresh: SOLD_OUT from the request's own", async () => {
    const prefix = uniquePrefix('r44-recount');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    // One unit, in bucket 0; its buyer is admitted and buys it.
    expect((await put(a.url, 'kit', { stock: 1, buckets: 3, queue: { admitPerSecond: 100 } })).status).toBe(200);
    const k = keys.product('kit');
    const first = homedIn(0, 3, 'k');
    const t = await join(a.url, 'kit', first);
    expect(t.body.state).toBe('admitted');
    expect((await buyWith(a.url, 'kit', first, t.body.pass)).status).toBe(201);
    await until(async () => (await client.hget(k.meta, 'queueUsed')) === '1');
    expect(await client.hget(k.meta, 'queueUsed')).toBe('1');
    // The count the app keeps says 1 unit, taken before that pass was marked used.
    const epoch = await client.hget(k.meta, 'epoch');
    const [s, us] = await client.time();
    countsOf(a).set('kit', {
      at: performance.now(),
      count: Promise.resolve(`1|0|0|${epoch}|${Number(s) * 1000 + Math.floor(Number(us) / 1000)}`),
    });
    // It serves nothing now (1 unit, 1 bought since): the join counts afresh, and hears SOLD_OUT.
    const late = await join(a.url, 'kit', homedIn(1, 3, 'k'));
    expect(late.status).toBe(409);
    expect(late.body.code).toBe('SOLD_OUT');
    expect(await client.hget(k.meta, 'queueJoined')).toBe('1');
  });

  it('units left in flight (a move whose app stopped after its first step) are landed and admitted for', async () => {
    const prefix = uniquePrefix('r44-stuck');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    expect((await put(a.url, 'cup', { stock: 3, buckets: 3, queue: { admitPerSecond: 100 } })).status).toBe(200);
    const ids = await bucketIds(a.url, 'cup');
    // What an app stopped after a move's first step leaves (as buckets.e2e-spec.ts):
    // buckets 1 and 2's units out, logged there, landed nowhere.
    for (const b of [1, 2]) {
      const out = await moveOut.run(client, moveOutKeys(keys.product(ids[b])), `crashed-${b}`, ids[0], 1, '');
      expect(out[0]).toBe('OUT');
    }
    expect(await stocks(keys, ids)).toEqual([1, 0, 0]);
    // Bucket 0's unit: admitted and bought by a buyer of bucket 0 (no refill: its own stock).
    const first = homedIn(0, 3, 'c');
    const t = await join(a.url, 'cup', first);
    expect(t.body.state).toBe('admitted');
    expect((await buyWith(a.url, 'cup', first, t.body.pass)).status).toBe(201);
    await until(async () => (await client.zcard(keys.product('cup').admitted)) === 0);
    // Two units are unsold (in flight): the next buyer must be admitted to buy one.
    const next = await join(a.url, 'cup', homedIn(1, 3, 'd'));
    expect(next.status).toBe(202);
    let state = next.body.state;
    // Admitted at the queue's rate: read again until it is (the test's timeout bounds it).
    for (let i = 0; i < 400 && state === 'waiting'; i++) {
      await sleep(50);
      state = (await request(a.url, 'GET', `/api/products/cup/queue/${next.body.ticket}`)).body.state;
    }
    expect((await request(a.url, 'GET', '/api/products/cup')).body).toMatchObject({ stock: 2 });
    expect(state).toBe('admitted');
  });

  it("a move of the last sale still logged (its app stopped mid-move) is closed: the new sale's queue answers SOLD_OUT", async () => {
    const prefix = uniquePrefix('r44-stale');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    const sale = { stock: 3, buckets: 3, queue: { admitPerSecond: 100 }, discardOrders: true };
    expect((await put(a.url, 'hat', sale)).status).toBe(200);
    const ids = await bucketIds(a.url, 'hat');
    const out = await moveOut.run(client, moveOutKeys(keys.product(ids[1])), 'crashed', ids[0], 1, '');
    expect(out[0]).toBe('OUT');
    // A new sale of nothing: its move log still holds the last sale's move (another epoch).
    expect((await put(a.url, 'hat', { ...sale, stock: 0 })).status).toBe(200);
    expect(await stocks(keys, ids)).toEqual([0, 0, 0]);
    expect((await request(a.url, 'GET', '/api/products/hat')).body).toMatchObject({ stock: 0 });
    const j = await join(a.url, 'hat', 'h1');
    expect(j.body.code ?? j.body.state).toBe('SOLD_OUT');
  });
});
