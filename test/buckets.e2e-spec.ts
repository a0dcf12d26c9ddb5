import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { processState, RunningApp, startApp } from '../harness/processes';
import { KeyLayout } from '../src/redis/key-layout';
import {
  moveDone,
  moveDoneKeys,
  moveIn,
  moveInKeys,
  moveOut,
  moveOutKeys,
  queue,
  queueKeys,
} from '../src/redis/lua-scripts';
import { bucketSlot, homeBucket, loggedMoves } from '../src/sale/buckets';
import { ADMIN_TOKEN, request, startTestApp, TestApp } from './helpers/app';
import { readSlotMap, uniquePrefix, useTestCluster } from './helpers/redis';

/** `count` user ids whose home bucket among `n` is `bucket` (homeBucket()), named `<stem><i>`. */
function usersOf(bucket: number, n: number, count: number, stem = 'u'): string[] {
  const users: string[] = [];
  for (let i = 0; users.length < count; i++) if (homeBucket(`${stem}${i}`, n) === bucket) users.push(`${stem}${i}`);
  return users;
}

/**
 * One hot product on three shards: its stock in escrow buckets on three masters of a
 * real Redis Cluster, rights moving to the bucket of a buyer whose own is dry (three
 * scripts, each atomic on its shard), SOLD_OUT only when every bucket and every move in
 * flight is empty, the per-user limit in each buyer's home bucket. Moves interrupted
 * between their steps (a script run by hand, an app SIGKILLed at a named stop point, the
 * source's master failed over meanwhile) are finished by whoever finds them, once.
 */
describe('escrow buckets on a Redis Cluster', () => {
  // A replica each: the source of a move fails over mid-move in the last test.
  const shared = useTestCluster(3, 1);
  let client: Cluster;
  beforeAll(() => {
    client = shared.client;
  });

  async function app(prefix: string, strategy = 'fenced'): Promise<TestApp> {
    return shared.opened(
      await startTestApp({
        REDIS_CLUSTER_NODES: shared.cluster.clusterNodes,
        KEY_PREFIX: prefix,
        LOCK_STRATEGY: strategy,
      }),
    );
  }

  const put = (url: string, id: string, json: Record<string, unknown>) =>
    request(url, 'PUT', `/api/products/${id}`, { json, admin: true });
  const buy = (url: string, productId: string, userId: string, quantity = 1) =>
    request(url, 'POST', '/api/orders', { json: { productId, userId, quantity } });

  /** Each bucket's stock and moves in flight, read from Redis itself. */
  async function bucketsNow(keys: KeyLayout, ids: string[]): Promise<{ stock: number[]; inFlight: number }> {
    const stock = await Promise.all(ids.map(async (id) => Number((await client.get(keys.product(id).stock)) ?? 0)));
    const moves = await Promise.all(ids.map((id) => inFlightOf(keys.product(id).moves)));
    return { stock, inFlight: moves.reduce((a, b) => a + b, 0) };
  }

  /** Moves logged out of a bucket and not closed (its moves hash's `o:<id>` records). */
  const inFlightOf = async (moves: string) => loggedMoves(await client.hgetall(moves)).length;

  /** The orders each bucket's log holds. */
  const logged = (keys: KeyLayout, ids: string[]) =>
    Promise.all(ids.map((id) => client.xlen(keys.product(id).orders))).then((n) => n.reduce((a, b) => a + b, 0));

  it('places 3 buckets on 3 masters, shows the product as their sum, and keeps the count fixed', async () => {
    const prefix = uniquePrefix('bkt-place');
    const { url } = await app(prefix);
    const res = await put(url, 'phone', { stock: 31, buckets: 3 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: 'phone', stock: 31, initialStock: 31, sold: 0, buckets: 3 });
    const each = await request(url, 'GET', '/api/products/phone/buckets', { admin: true });
    expect(each.status).toBe(200);
    expect(each.body.map((b: { initialStock: number }) => b.initialStock)).toEqual([11, 10, 10]);
    const map = await readSlotMap(client.nodes('master')[0]);
    const masters = each.body.map((b: { id: string; slot: number }) => {
      expect(b.slot).toBe(bucketSlot(b.id));
      return map.masterOfSlot(b.slot);
    });
    expect(new Set(masters).size).toBe(3);
    // The admin's view is the admin's.
    expect((await request(url, 'GET', '/api/products/phone/buckets')).status).toBe(401);
    // Another count is refused, nothing changed; the same count (or none) restarts the sale.
    const fixed = await put(url, 'phone', { stock: 5, buckets: 2, discardOrders: true });
    expect(fixed.status).toBe(409);
    expect(fixed.body.code).toBe('BUCKETS_FIXED');
    expect((await request(url, 'GET', '/api/products/phone')).body).toMatchObject({ stock: 31, buckets: 3 });
    // A waiting room over the buckets (the next test), and off again.
    const queued = await put(url, 'phone', { stock: 5, queue: { admitPerSecond: 10 } });
    expect(queued.status).toBe(200);
    expect(queued.body).toMatchObject({ stock: 5, buckets: 3, queue: { admitPerSecond: 10 } });
    expect((await put(url, 'phone', { stock: 6, discardOrders: true })).body).toMatchObject({
      stock: 6,
      buckets: 3,
      queue: null,
    });
  });

  it("a waiting room over three buckets: admits by every bucket's units, a pass buys once in its home bucket", async () => {
    const prefix = uniquePrefix('bkt-queue');
    const keys = new KeyLayout(prefix);
    const [a, b] = [await app(prefix), await app(prefix)];
    expect((await put(a.url, 'gig', { stock: 3, buckets: 3, queue: { admitPerSecond: 100 } })).status).toBe(200);
    const ids: string[] = (await request(a.url, 'GET', '/api/products/gig/buckets', { admin: true })).body.map(
      (x: { id: string }) => x.id,
    );
    const join = (url: string, userId: string) => request(url, 'POST', '/api/products/gig/queue', { json: { userId } });
    const buyWith = (url: string, userId: string, pass: string) =>
      request(url, 'POST', '/api/products/gig/orders', { json: { userId }, headers: { 'admission-pass': pass } });
    const [home0] = usersOf(0, 3, 1, 'q');
    const [home1, late1] = usersOf(1, 3, 2, 'q');
    const [home2] = usersOf(2, 3, 1, 'q');
    // Every bucket sells only through the queue.
    expect((await buy(b.url, 'gig', home1)).body.code).toBe('ADMISSION_REQUIRED');
    // Bucket 0 (the queue's own) sold out by its buyer ...
    const first = await join(a.url, home0);
    expect(first.body.state).toBe('admitted');
    expect((await buyWith(b.url, home0, first.body.pass)).status).toBe(201);
    expect((await bucketsNow(keys, ids)).stock).toEqual([0, 1, 1]);
    // ... yet the queue admits by the others' units (not SOLD_OUT), and the pass buys in
    // its buyer's home bucket, on another shard, once: a retry is answered the same order.
    const ticket = await join(b.url, home1);
    expect(ticket.body.state).toBe('admitted');
    const bought = await buyWith(a.url, home1, ticket.body.pass);
    expect(bought.status).toBe(201);
    expect(bought.body.productId).toBe('gig');
    const again = await buyWith(b.url, home1, ticket.body.pass);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.orderId).toBe(bought.body.orderId);
    expect(await client.xlen(keys.product(ids[1]).orders)).toBe(1);
    expect((await request(a.url, 'GET', `/api/products/gig/queue/${ticket.body.ticket}`)).body.state).toBe('used');
    // Another buyer's pass, and one no queue issued, buy nothing.
    expect((await buyWith(a.url, home2, ticket.body.pass)).body).toMatchObject({
      code: 'ADMISSION_INVALID',
      message: expect.stringContaining("another buyer's"),
    });
    expect((await buyWith(a.url, home2, 'A'.repeat(22))).body).toMatchObject({
      code: 'ADMISSION_INVALID',
      message: expect.stringContaining('not a pass this sale issued'),
    });
    // The last unit is in bucket 2: a buyer of dry bucket 1 is admitted and served from it.
    const last = await join(a.url, late1);
    expect(last.body.state).toBe('admitted');
    expect((await buyWith(b.url, late1, last.body.pass)).status).toBe(201);
    expect(await bucketsNow(keys, ids)).toEqual({ stock: [0, 0, 0], inFlight: 0 });
    // Every bucket and move empty: now, and only now, SOLD_OUT.
    const none = await join(b.url, home2);
    expect(none.status).toBe(409);
    expect(none.body.code).toBe('SOLD_OUT');
    expect(await logged(keys, ids)).toBe(3);
  });

  it.each(['fenced', 'atomic'])(
    '%s: every buyer homed in one bucket still buys every unit; SOLD_OUT only once all are gone',
    async (strategy) => {
      const prefix = uniquePrefix(`bkt-skew-${strategy}`);
      const keys = new KeyLayout(prefix);
      const { url } = await app(prefix, strategy);
      expect((await put(url, 'tv', { stock: 30, buckets: 3 })).status).toBe(200);
      const ids = (await request(url, 'GET', '/api/products/tv/buckets', { admin: true })).body.map(
        (b: { id: string }) => b.id,
      );
      const answers = await Promise.all(usersOf(0, 3, 40).map((u) => buy(url, 'tv', u)));
      const codes = answers.map((a) => (a.status === 201 ? 201 : a.body.code));
      expect(codes.filter((c) => c === 201)).toHaveLength(30);
      expect(codes.filter((c) => c === 'SOLD_OUT')).toHaveLength(10);
      // Every order in the home bucket's log, named by the product, its id by the bucket.
      expect(answers.filter((a) => a.status === 201).every((a) => a.body.productId === 'tv')).toBe(true);
      expect(await client.xlen(keys.product(ids[0]).orders)).toBe(30);
      expect(await bucketsNow(keys, ids)).toEqual({ stock: [0, 0, 0], inFlight: 0 });
      // Rights came from both other buckets, each move once.
      expect(await client.hlen(keys.product(ids[0]).landed)).toBeGreaterThanOrEqual(2);
      expect((await request(url, 'GET', '/api/products/tv')).body).toMatchObject({ stock: 0, sold: 30, orders: 30 });
      const metrics = await (await fetch(`${url}/metrics`)).text();
      expect(Number(/^seckill_escrow_moves_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(2);
    },
    60_000,
  );

  it('admits no more passes than units while a move, landed and not closed, reads on both sides', async () => {
    const prefix = uniquePrefix('bkt-queue-move');
    const keys = new KeyLayout(prefix);
    const { url } = await app(prefix);
    expect((await put(url, 'fan', { stock: 3, buckets: 3, queue: { admitPerSecond: 100 } })).status).toBe(200);
    const ids: string[] = (await request(url, 'GET', '/api/products/fan/buckets', { admin: true })).body.map(
      (x: { id: string }) => x.id,
    );
    // What an app stopped between a move's landing and its close leaves: the unit in
    // bucket 0's stock, and still logged in flight on bucket 1.
    const [status, units, epoch] = await moveOut.run(client, moveOutKeys(keys.product(ids[1])), 'half', ids[0], 1, '');
    expect(status).toBe('OUT');
    expect(await moveIn.run(client, moveInKeys(keys.product(ids[0])), 'half', units, epoch as string)).toBe('IN');
    expect(await bucketsNow(keys, ids)).toEqual({ stock: [2, 0, 1], inFlight: 1 });
    const states = [];
    for (const u of ['f0', 'f1', 'f2', 'f3']) {
      states.push((await request(url, 'POST', '/api/products/fan/queue', { json: { userId: u } })).body.state);
    }
    // Three units, three passes: the fourth waits (the unit counted twice would admit it).
    expect(states).toEqual(['admitted', 'admitted', 'admitted', 'waiting']);
  });

  it('counts a pass marked used after the app read the buckets once, not twice (queue-5.lua)', async () => {
    const prefix = uniquePrefix('bkt-queue-used');
    const keys = new KeyLayout(prefix);
    const { url } = await app(prefix);
    expect((await put(url, 'fob', { stock: 4, buckets: 3, queue: { admitPerSecond: 100 } })).status).toBe(200);
    const k = keys.product('fob');
    // The app read 4 units in the buckets with 0 units of used passes before; two were
    // marked used since: their orders may have come after their buckets were read, so
    // they serve 2 more at most.
    await client.hset(k.meta, 'queueUsed', 2);
    const epoch = await client.hget(k.meta, 'epoch');
    const [s, us] = await client.time();
    const count = `4|0|0|${epoch}|${Number(s) * 1000 + Math.floor(Number(us) / 1000)}|1`;
    const states = [];
    for (const u of ['x1', 'x2', 'x3']) {
      const [state] = await queue.run(client, queueKeys(k), 'join', u, `ticket-${u}`, `pass-${u}`, count);
      states.push(state);
    }
    expect(states).toEqual(['admitted', 'admitted', 'waiting']);
  });

  it('keeps the per-user limit in the home bucket, wherever the units came from', async () => {
    const prefix = uniquePrefix('bkt-limit');
    const keys = new KeyLayout(prefix);
    const { url } = await app(prefix);
    // Bucket 0 gets 2 units (6 over 3), and its buyer may buy 3: the third comes from another bucket.
    expect((await put(url, 'cam', { stock: 6, buckets: 3, perUserLimit: 3 })).status).toBe(200);
    const [user] = usersOf(0, 3, 1, 'limit');
    for (let i = 0; i < 3; i++) expect((await buy(url, 'cam', user)).status).toBe(201);
    const fourth = await buy(url, 'cam', user);
    expect(fourth.status).toBe(409);
    expect(fourth.body.code).toBe('LIMIT_REACHED');
    expect(await client.hget(keys.product('cam').buyers, user)).toBe('3');
  });

  it('sells the last unit with every bucket but one dry, then answers SOLD_OUT', async () => {
    const prefix = uniquePrefix('bkt-last');
    const keys = new KeyLayout(prefix);
    const { url } = await app(prefix);
    expect((await put(url, 'pen', { stock: 3, buckets: 3 })).status).toBe(200);
    const ids: string[] = (await request(url, 'GET', '/api/products/pen/buckets', { admin: true })).body.map(
      (b: { id: string }) => b.id,
    );
    // Buckets 0 and 1 sold out by their own buyers: one unit left, in bucket 2.
    for (const b of [0, 1]) expect((await buy(url, 'pen', usersOf(b, 3, 1, 'own')[0])).status).toBe(201);
    expect((await bucketsNow(keys, ids)).stock).toEqual([0, 0, 1]);
    const [first, second] = usersOf(1, 3, 2, 'late');
    expect((await buy(url, 'pen', first)).status).toBe(201);
    const last = await buy(url, 'pen', second);
    expect(last.status).toBe(409);
    expect(last.body.code).toBe('SOLD_OUT');
    expect(await logged(keys, ids)).toBe(3);
  });

  it('finishes moves left in flight (a source that logged them, no landing): every unit sold once', async () => {
    const prefix = uniquePrefix('bkt-flight');
    const keys = new KeyLayout(prefix);
    const { url } = await app(prefix);
    expect((await put(url, 'cup', { stock: 3, buckets: 3 })).status).toBe(200);
    const ids: string[] = (await request(url, 'GET', '/api/products/cup/buckets', { admin: true })).body.map(
      (b: { id: string }) => b.id,
    );
    // What an app stopped after the first step leaves: units out of buckets 1 and 2, logged there.
    for (const b of [1, 2]) {
      const out = await moveOut.run(client, moveOutKeys(keys.product(ids[b])), `crashed-${b}`, ids[0], 1, '');
      expect(out[0]).toBe('OUT');
    }
    expect(await bucketsNow(keys, ids)).toEqual({ stock: [1, 0, 0], inFlight: 2 });
    // GET counts the units in flight as stock: they are unsold.
    expect((await request(url, 'GET', '/api/products/cup')).body).toMatchObject({ stock: 3, sold: 0 });
    // Buyers of the dry buckets 1 and 2 find them, land them and buy.
    const buyers = [...usersOf(1, 3, 2, 'f'), ...usersOf(2, 3, 2, 'g')];
    const answers = [];
    for (const u of buyers) answers.push(await buy(url, 'cup', u));
    expect(answers.map((a) => a.status)).toEqual([201, 201, 201, 409]);
    expect(answers[3].body.code).toBe('SOLD_OUT');
    expect(await bucketsNow(keys, ids)).toEqual({ stock: [0, 0, 0], inFlight: 0 });
    expect(await logged(keys, ids)).toBe(3);
  });

  it('lands a move once when two finish it at the same time, and gives refused units back once', async () => {
    const prefix = uniquePrefix('bkt-race');
    const keys = new KeyLayout(prefix);
    const { url } = await app(prefix);
    expect((await put(url, 'mug', { stock: 20, buckets: 2 })).status).toBe(200);
    const bucketIds: string[] = (await request(url, 'GET', '/api/products/mug/buckets', { admin: true })).body.map(
      (b: { id: string }) => b.id,
    );
    const [home, other] = [keys.product(bucketIds[0]), keys.product(bucketIds[1])];
    const [, units, epoch] = await moveOut.run(client, moveOutKeys(other), 't1', bucketIds[0], 1, '');
    expect(units).toBe(5); // half the source's 10
    // Two finishers, each landing and closing the same move.
    const finish = async () => {
      const landing = await moveIn.run(client, moveInKeys(home), 't1', units, epoch as string);
      return [landing, await moveDone.run(client, moveDoneKeys(other), 't1', landing)] as const;
    };
    const both = await Promise.all([finish(), finish()]);
    expect(both.map((f) => f[0])).toEqual(['IN', 'IN']);
    expect(await client.get(home.stock)).toBe('15');
    expect(await client.get(other.stock)).toBe('5');
    expect(await inFlightOf(other.moves)).toBe(0);
    // A destination whose sale moved on refuses the units for good; the source takes them back once.
    const [, back, epoch2] = await moveOut.run(client, moveOutKeys(other), 't2', bucketIds[0], 1, '');
    await client.hset(home.meta, 'epoch', 'another-sale');
    const refused = await Promise.all([finish2(), finish2()]);
    async function finish2() {
      const landing = await moveIn.run(client, moveInKeys(home), 't2', back, epoch2 as string);
      return [landing, await moveDone.run(client, moveDoneKeys(other), 't2', landing)] as const;
    }
    expect(refused.map((f) => f[0])).toEqual(['STALE', 'STALE']);
    expect(refused.map((f) => f[1]).sort()).toEqual([0, back]);
    // Even once the destination's epoch is the move's again, the marker keeps it out.
    await client.hset(home.meta, 'epoch', epoch2 as string);
    expect(await moveIn.run(client, moveInKeys(home), 't2', back, epoch2 as string)).toBe('STALE');
    expect(await client.get(home.stock)).toBe('15');
    expect(await client.get(other.stock)).toBe('5');
  });

  /**
   * A product of 4 units in 2 buckets; `stopper` (FAULT_STOP_AT=move-between:1) sells
   * bucket 0's 2 units, then a third buyer of bucket 0 makes it move units out of bucket 1
   * and stop itself there, the units logged on the source only. Resolves once it is
   * stopped, with the bucket ids and the third buyer's request (never answered).
   */
  async function stoppedMidMove(stopper: RunningApp, id: string): Promise<{ ids: string[]; third: Promise<unknown> }> {
    expect((await put(stopper.url, id, { stock: 4, buckets: 2 })).status).toBe(200);
    const ids: string[] = (await request(stopper.url, 'GET', `/api/products/${id}/buckets`, { admin: true })).body.map(
      (b: { id: string }) => b.id,
    );
    const [a, b, c] = usersOf(0, 2, 3, 'k');
    for (const u of [a, b]) expect((await buy(stopper.url, id, u)).status).toBe(201);
    const third = buy(stopper.url, id, c).catch(() => null);
    for (let i = 0; processState(stopper.pid) !== 'T'; i++) {
      expect(i).toBeLessThan(400);
      await sleep(25);
    }
    return { ids, third };
  }

  /** The stopped app SIGKILLed; `url`'s buyers land the units in flight, buy the rest, then hear SOLD_OUT: each unit sold once. */
  async function finishedElsewhere(
    stopper: RunningApp,
    third: Promise<unknown>,
    url: string,
    keys: KeyLayout,
    ids: string[],
  ) {
    process.kill(stopper.pid, 'SIGKILL');
    await third;
    expect(await bucketsNow(keys, ids)).toEqual({ stock: [0, 1], inFlight: 1 });
    const answers = [];
    for (const u of usersOf(0, 2, 6, 'k').slice(3)) answers.push(await buy(url, ids[0], u));
    expect(answers.map((x) => (x.status === 201 ? 201 : x.body.code))).toEqual([201, 201, 'SOLD_OUT']);
    expect(await bucketsNow(keys, ids)).toEqual({ stock: [0, 0], inFlight: 0 });
    expect(await logged(keys, ids)).toBe(4);
  }

  const stopperEnv = (prefix: string) => ({
    REDIS_CLUSTER_NODES: shared.cluster.clusterNodes,
    KEY_PREFIX: prefix,
    ADMIN_TOKEN,
    LOG_LEVEL: 'warn',
    FAULT_STOP_AT: 'move-between:1',
    ALLOW_UNSAFE: '1',
  });

  it("an app SIGKILLed between a move's steps: another instance lands the units, every unit sold once", async () => {
    const prefix = uniquePrefix('bkt-kill');
    const stopper = await startApp({ env: stopperEnv(prefix) });
    const { url } = await app(prefix);
    try {
      const { ids, third } = await stoppedMidMove(stopper, 'hat');
      await finishedElsewhere(stopper, third, url, new KeyLayout(prefix), ids);
    } finally {
      await stopper.stop();
    }
  });

  it("the source's master failed over between a move's steps: the move's record went with it, landed once", async () => {
    const prefix = uniquePrefix('bkt-failover');
    const keys = new KeyLayout(prefix);
    const stopper = await startApp({ env: stopperEnv(prefix) });
    const { url } = await app(prefix);
    const nodes: Redis[] = [];
    try {
      const { ids, third } = await stoppedMidMove(stopper, 'cap');
      // The units are out of bucket 1, logged on its master only: that master hands its slots to its replica.
      const slot = bucketSlot(ids[1]);
      const master = await shared.cluster.masterOfSlot(slot);
      const replicas = shared.cluster.nodes.filter((x) => x.role === 'replica');
      nodes.push(...replicas.map((node) => new Redis(node.url)));
      const roles = await Promise.all(nodes.map((c) => c.info('replication')));
      const at = roles.findIndex((info) => new RegExp(`^master_port:${master.port}\\r?$`, 'm').test(info));
      const [replica, promoted] = [replicas[at], nodes[at]];
      expect(await promoted.cluster('FAILOVER')).toBe('OK');
      for (let i = 0; (await shared.cluster.masterOfSlot(slot)).port !== replica.port; i++) {
        expect(i).toBeLessThan(400);
        await sleep(25);
      }
      expect(loggedMoves(await promoted.hgetall(keys.product(ids[1]).moves))).toHaveLength(1);
      await finishedElsewhere(stopper, third, url, keys, ids);
    } finally {
      nodes.forEach((c) => c.disconnect());
      await stopper.stop();
    }
  });
});
