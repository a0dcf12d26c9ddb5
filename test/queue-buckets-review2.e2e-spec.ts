import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster } from 'ioredis';
import { WaitingRoom } from '../src/door/waiting-room';
import { Escrow } from '../src/orders/escrow';
import { KeyLayout } from '../src/redis/key-layout';
import { moveDone, moveDoneKeys, moveIn, moveInKeys, moveOut, moveOutKeys } from '../src/redis/lua-scripts';
import { request } from './helpers/app';
import { homedIn, queueOverBuckets, until } from './helpers/queue-buckets';
import { uniquePrefix, useTestCluster } from './helpers/redis';

/**
 * A second outside review of the waiting room over escrow buckets (f21ea17): each test
 * failed there. Interleavings are forced, not raced (as test/queue-buckets-review.e2e-spec.ts
 * does): the app's own reads are held at one point Redis allows, real scripts run on the
 * real cluster meanwhile.
 */
describe('the waiting room over escrow buckets, a second outside review', () => {
  const shared = useTestCluster(3, 0);
  let client: Cluster;
  beforeAll(() => {
    client = shared.client;
  });

  const { app, put, join, buyWith, bucketIds, stocks, countsOf } = queueOverBuckets(shared);
  /** Passes issued and neither used nor lapsed, by Redis's clock (lapsed ones stay in the set a while: queue-5.lua). */
  const livePasses = async (admitted: string) => {
    const [s, us] = await client.time();
    return client.zcount(admitted, `(${Number(s) * 1000 + Math.floor(Number(us) / 1000)}`, '+inf');
  };

  it("a move made between the GET of a bucket's stock and the read of its move log (one pipeline, not atomic) is not counted twice", async () => {
    const prefix = uniquePrefix('r44b-pipe');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    expect((await put(a.url, 'pip', { stock: 3, buckets: 3, queue: { admitPerSecond: 100 } })).status).toBe(200);
    const ids = await bucketIds(a.url, 'pip');
    expect(await stocks(keys, ids)).toEqual([1, 1, 1]);
    const states: string[] = [];
    for (const u of ['p0', 'p1', 'p2', 'p3']) states.push((await join(a.url, 'pip', u)).body.state);
    expect(states).toEqual(['admitted', 'admitted', 'admitted', 'waiting']);
    countsOf(a).clear();
    // Escrow.read() reads a bucket with a pipeline of reads around its GET stock (HGET epoch, HGETALL moves after it):
    // not atomic, another client's commands may run between them. Held here: bucket 1's
    // GET answers (1), then a whole move of its unit to bucket 0 runs (out, in, closed),
    // then its HGET and HGETALL answer (v moved on, nothing in flight); buckets 0 and 2
    // are read after (an order Promise.all allows).
    const escrow = a.app.get(Escrow) as unknown as { redis: Cluster };
    const real = escrow.redis;
    let armed = true;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const between = async () => {
      const [status, units, epoch] = await moveOut.run(client, moveOutKeys(keys.product(ids[1])), 'mv', ids[0], 1, '');
      expect(status).toBe('OUT');
      const landing = await moveIn.run(client, moveInKeys(keys.product(ids[0])), 'mv', units, epoch as string);
      expect(landing).toBe('IN');
      await moveDone.run(client, moveDoneKeys(keys.product(ids[1])), 'mv', landing);
    };
    escrow.redis = new Proxy(real, {
      get(target, prop) {
        if (prop === 'pipeline' && armed) {
          return () => {
            const calls: [string, unknown[]][] = [];
            const builder = {
              get: (...args: unknown[]) => (calls.push(['get', args]), builder),
              hget: (...args: unknown[]) => (calls.push(['hget', args]), builder),
              hmget: (...args: unknown[]) => (calls.push(['hmget', args]), builder),
              hgetall: (...args: unknown[]) => (calls.push(['hgetall', args]), builder),
              exec: async () => {
                const stockKey = calls.find(([name]) => name === 'get')![1][0] as string;
                const first = stockKey === keys.product(ids[1]).stock;
                if (!first) await gate;
                const out: [null, unknown][] = [];
                for (const [name, args] of calls) {
                  out.push([
                    null,
                    await (target as unknown as Record<string, (...x: unknown[]) => Promise<unknown>>)[name](...args),
                  ]);
                  // Right behind the bucket's GET of its stock.
                  if (first && name === 'get') {
                    await between();
                    release();
                  }
                }
                if (first) armed = false;
                return out;
              },
            };
            return builder;
          };
        }
        const value = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const p4 = await join(a.url, 'pip', 'p4');
    escrow.redis = real;
    expect(armed).toBe(false);
    expect(await stocks(keys, ids)).toEqual([2, 0, 1]);
    // Three units, three passes outstanding: p3 and p4 must still wait.
    expect(await client.zcard(keys.product('pip').admitted)).toBe(3);
    expect(p4.body.state).toBe('waiting');
  });

  it('a pass that bought and then lapsed, removed by a newer count, is not admitted for again by a count kept from before its purchase', async () => {
    const prefix = uniquePrefix('r44b-lapse');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    const k = keys.product('lap');
    expect(
      (await put(a.url, 'lap', { stock: 2, buckets: 3, queue: { admitPerSecond: 100, passTtlMs: 1000 } })).status,
    ).toBe(200);
    const ids = await bucketIds(a.url, 'lap');
    const l1 = await join(a.url, 'lap', 'l1');
    const l2 = await join(a.url, 'lap', 'l2');
    expect([l1.body.state, l2.body.state]).toEqual(['admitted', 'admitted']);
    // A count of this instance's (2 units, usedAt 0, countedAt now), as a join begun now takes it.
    const room = a.app.get(WaitingRoom) as unknown as { countNow: (id: string) => Promise<string> };
    const kept = await room.countNow('lap');
    expect(kept).toMatch(/^2\|0\|/);
    // l1 buys with its pass; its app stops right after the order's write: used() (fire and
    // forget, best effort) never lands, so l1's pass stays outstanding until it lapses.
    const wr = a.app.get(WaitingRoom);
    const used = wr.used.bind(wr);
    wr.used = async () => undefined;
    expect((await buyWith(a.url, 'lap', 'l1', l1.body.pass)).status).toBe(201);
    wr.used = used;
    expect((await stocks(keys, ids)).reduce((s, n) => s + n, 0)).toBe(1);
    expect(await client.hget(k.meta, 'queueUsed')).toBeNull();
    // Both passes lapse. A count begun now (l3's join) removes them: 1 unit, l3 admitted. Right.
    await sleep(Math.max(0, new Date(l2.body.passExpiresAt).getTime() - Date.now()) + 100);
    countsOf(a).clear();
    const l3 = await join(a.url, 'lap', 'l3');
    expect(l3.body.state).toBe('admitted');
    expect(await livePasses(k.admitted)).toBe(1);
    // Meanwhile a join on this instance holds the count taken before l1's purchase (under
    // COUNT_TRUST_MS old: l1 bought just before its pass lapsed). By that count l1's pass
    // still holds its unit (it lapsed after countedAt), but a newer count removed it.
    countsOf(a).set('lap', { at: performance.now(), count: Promise.resolve(kept) });
    const l4 = await join(a.url, 'lap', 'l4');
    expect((await stocks(keys, ids)).reduce((s, n) => s + n, 0)).toBe(1);
    // One unit left, one pass (l3's) outstanding: l4 must wait.
    expect(await livePasses(k.admitted)).toBe(1);
    expect(l4.body.state).toBe('waiting');
  });
  it("a pass-less purchase in another bucket is refused naming the product's own queue, never a bucket's", async () => {
    const prefix = uniquePrefix('r44b-named');
    const a = await app(prefix);
    expect((await put(a.url, 'nam', { stock: 3, buckets: 3, queue: { admitPerSecond: 100 } })).status).toBe(200);
    const user = homedIn(1, 3, 'n');
    const bought = await request(a.url, 'POST', '/api/products/nam/orders', { json: { userId: user, quantity: 1 } });
    expect(bought.body.code).toBe('ADMISSION_REQUIRED');
    // "join it (POST /api/products/nam~1/queue)": a route no buyer can call (ids hold no '~').
    expect(JSON.stringify(bought.body)).not.toContain('nam~');
  });

  it('after the sell-out, concurrent ticket reads share a count begun during them (not one count per read)', async () => {
    const prefix = uniquePrefix('r44b-herd');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    const k = keys.product('herd');
    expect((await put(a.url, 'herd', { stock: 1, buckets: 3, queue: { admitPerSecond: 100 } })).status).toBe(200);
    const first = await join(a.url, 'herd', 'h0');
    expect(first.body.state).toBe('admitted');
    const tickets: string[] = [];
    for (let i = 1; i <= 20; i++) {
      const t = await join(a.url, 'herd', `h${i}`);
      expect(t.body.state).toBe('waiting');
      tickets.push(t.body.ticket);
    }
    expect((await buyWith(a.url, 'herd', 'h0', first.body.pass)).status).toBe(201);
    await until(async () => (await client.hget(k.meta, 'queueUsed')) === '1');
    // The herd of waiting buyers polls its tickets: 20 reads at once. The first count is
    // held until every read has begun, so each but the first began before it and may not
    // hear sold_out from it: it serves the first read; the others share one more.
    const wr = a.app.get(WaitingRoom);
    const room = wr as unknown as { countNow: (id: string) => Promise<string> };
    const countNow = room.countNow.bind(room);
    const read = wr.read.bind(wr);
    let begun = 0;
    let allBegun!: () => void;
    const all = new Promise<void>((resolve) => (allBegun = resolve));
    wr.read = (...args: Parameters<typeof read>) => {
      if (++begun === tickets.length) allBegun();
      return read(...args);
    };
    let counted = 0;
    room.countNow = async (id: string) => {
      if (++counted === 1) await all;
      return countNow(id);
    };
    countsOf(a).clear();
    const reads = await Promise.all(tickets.map((t) => request(a.url, 'GET', `/api/products/herd/queue/${t}`)));
    room.countNow = countNow;
    wr.read = read;
    expect(begun).toBe(tickets.length);
    expect(reads.map((r) => r.body.state)).toEqual(tickets.map(() => 'sold_out'));
    // Each count reads every bucket twice (and the queue's shard first): two for the herd.
    expect(counted).toBe(2);
  });

  it("a join's own count, taken before a pass's last-moment purchase, is taken again once another instance removed the lapsed pass (its mark not landed yet): one pass for that unit", async () => {
    const prefix = uniquePrefix('r44b-lapse2');
    const keys = new KeyLayout(prefix);
    const a = await app(prefix);
    const b = await app(prefix);
    const k = keys.product('lap2');
    expect(
      (await put(a.url, 'lap2', { stock: 2, buckets: 3, queue: { admitPerSecond: 100, passTtlMs: 1000 } })).status,
    ).toBe(200);
    const ids = await bucketIds(a.url, 'lap2');
    const l1 = await join(a.url, 'lap2', 'l1');
    const l2 = await join(a.url, 'lap2', 'l2');
    expect([l1.body.state, l2.body.state]).toEqual(['admitted', 'admitted']);
    countsOf(a).clear();
    // l4's join on instance a counts (2 units); between its count and its script (an await
    // apart): l1 buys just before its pass lapses, its mark (used(), fire and forget) still
    // on its way; both passes lapse; l3's join on instance b counts afresh, removes them and
    // admits l3 for the one unit left.
    const wr = a.app.get(WaitingRoom);
    const room = wr as unknown as { countNow: (id: string) => Promise<string> };
    const countNow = room.countNow.bind(room);
    const used = wr.used.bind(wr);
    const marks: (() => Promise<void>)[] = [];
    wr.used = async (...args: Parameters<typeof used>) => {
      marks.push(() => used(...args));
    };
    let armed = true;
    room.countNow = async (id: string) => {
      const count = await countNow(id);
      if (armed) {
        armed = false;
        expect(count).toMatch(/^2\|0\|/);
        expect((await buyWith(a.url, 'lap2', 'l1', l1.body.pass)).status).toBe(201);
        await sleep(Math.max(0, new Date(l2.body.passExpiresAt).getTime() - Date.now()) + 100);
        const l3 = await join(b.url, 'lap2', 'l3');
        expect(l3.body.state).toBe('admitted');
      }
      return count;
    };
    const l4 = await join(a.url, 'lap2', 'l4');
    room.countNow = countNow;
    wr.used = used;
    for (const mark of marks) await mark();
    expect((await stocks(keys, ids)).reduce((s, n) => s + n, 0)).toBe(1);
    // One unit left, one pass (l3's) outstanding: l4 must wait.
    expect(await livePasses(k.admitted)).toBe(1);
    expect(l4.body.state).toBe('waiting');
  });
});
