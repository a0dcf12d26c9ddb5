import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { checkSettled, waitForSettlement } from '../bench/settled';
import { PrivatePostgres, startPrivatePostgres } from '../harness/postgres';
import { OUTCOME_TTL_MS } from '../src/orders/order';
import { createRedisCluster } from '../src/redis/create-client';
import calculateSlot from 'cluster-key-slot';
import { KeyLayout, ProductKeys } from '../src/redis/key-layout';
import { orderOutcome, orderOutcomeKeys, purchase, purchaseKeys } from '../src/redis/lua-scripts';
import { MARK_TAGS, markGuess, markSlot, markTags } from '../src/redis/shard-marks';
import { migrate } from '../src/settlement/migrations';
import { createPool } from '../src/settlement/postgres';
import { SETTLE_GROUP, Settler } from '../src/settlement/settler';
import { pay, request, startTestApp } from './helpers/app';
import {
  closeClient,
  clusterReady,
  readSlotMap,
  resetPlainSale,
  startTestCluster,
  TestCluster,
  uniquePrefix,
} from './helpers/redis';

const hostPort = (s: string) => {
  const [host, port] = s.split(':');
  return { host, port: Number(port) };
};

/**
 * Settlement on a Redis Cluster: each product's order stream, states and deadlines live
 * on its own shard (one hash tag), the settler's consumer group and the sweeper follow
 * them there; the products' list is one key of its own. A product on every master.
 * One cluster for the file: a test that moves slots puts them back, and the last one
 * takes a master away for good.
 */
describe('settlement on a Redis Cluster', () => {
  let cluster: TestCluster;
  let pg: PrivatePostgres;
  let client: Cluster;
  /** A plain connection to each node, by `127.0.0.1:port`: CLUSTER SETSLOT, MIGRATE. */
  let admins: Map<string, Redis>;

  beforeAll(async () => {
    [cluster, pg] = await Promise.all([startTestCluster({ masters: 3 }), startPrivatePostgres()]);
    client = createRedisCluster({ nodes: cluster.clusterNodes.split(',').map(hostPort), tls: false }, 'test');
    await clusterReady(client);
    admins = new Map(cluster.nodes.map((n) => [`127.0.0.1:${n.port}`, new Redis(n.port, '127.0.0.1')]));
  }, 60_000);

  afterAll(async () => {
    client?.disconnect();
    await Promise.all([...(admins?.values() ?? [])].map(closeClient));
    await Promise.all([cluster?.stop(), pg?.remove()]);
  });

  /** A sale of 4 units of `productId` started through the app, one bought by each of `users`: their order ids. */
  async function sell(url: string, productId: string, paymentTimeoutMs: number, users: string[]): Promise<string[]> {
    const put = await request(url, 'PUT', `/api/products/${productId}`, {
      json: { stock: 4, paymentTimeoutMs },
      admin: true,
    });
    expect(put.status).toBe(200);
    const ids: string[] = [];
    for (const user of users) {
      const res = await request(url, 'POST', '/api/orders', { json: { productId, userId: user } });
      expect(res.status).toBe(201);
      ids.push(res.body.orderId as string);
    }
    return ids;
  }

  const admin = (node: string) => admins.get(node)!;
  const nodeId = async (node: string) => String(await admin(node).cluster('MYID'));

  /** The first step of a reshard of `slot` (redis-cli --cluster reshard): IMPORTING on `to`, MIGRATING on `from`. */
  async function beginMove(slot: number, from: string, to: string): Promise<void> {
    await admin(to).cluster('SETSLOT', slot, 'IMPORTING', await nodeId(from));
    await admin(from).cluster('SETSLOT', slot, 'MIGRATING', await nodeId(to));
  }

  /** A reshard begun and no key moved yet, called off: the slot stays where it was. */
  async function callOffMove(slot: number, from: string, to: string): Promise<void> {
    await admin(from).cluster('SETSLOT', slot, 'STABLE');
    await admin(to).cluster('SETSLOT', slot, 'STABLE');
  }

  /** The rest of it: the slot's keys still on `from` MIGRATEd, then SETSLOT NODE on every master, `to` first. */
  async function endMove(slot: number, from: string, to: string): Promise<void> {
    const [host, port] = to.split(':');
    for (;;) {
      const keys = (await admin(from).cluster('GETKEYSINSLOT', slot, 100)) as string[];
      if (keys.length === 0) break;
      await admin(from).call('MIGRATE', host, port, '', 0, 5_000, 'KEYS', ...keys);
    }
    const masters = (await readSlotMap(admin(to))).masters;
    const id = await nodeId(to);
    for (const node of [to, ...masters.filter((m) => m !== to)]) await admin(node).cluster('SETSLOT', slot, 'NODE', id);
  }

  async function moveSlot(slot: number, from: string, to: string): Promise<void> {
    await beginMove(slot, from, to);
    await endMove(slot, from, to);
  }

  /** The master of mark tag 1's slot (0), another master, and a product of the first's. */
  async function beside(keys: KeyLayout): Promise<{ source: string; target: string; productId: string }> {
    const map = await readSlotMap(client);
    const source = map.masterOfSlot(markSlot(0));
    const target = map.masters.find((m) => m !== source)!;
    const productId = map
      .productsOnEveryShard(keys)
      .find((p) => map.masterOfSlot(calculateSlot(keys.product(p).stock)) === source)!;
    return { source, target, productId };
  }

  /**
   * What a product's scripts left of one order: its stock, log, state and deadline, and
   * the masters (by the slot map now) whose shard marks hold the order's deadline and
   * the product's mark.
   */
  async function traces(keys: KeyLayout, k: ProductKeys, productId: string, orderId: string) {
    const map = await readSlotMap(client);
    const on = async (part: 'settle' | 'due', member: string) => {
      const nodes: string[] = [];
      for (const [i, tag] of MARK_TAGS.entries())
        if ((await client.zscore(keys.marks(tag)[part], member)) !== null) nodes.push(map.masterOfSlot(markSlot(i)));
      return [...new Set(nodes)];
    };
    return {
      stock: await client.get(k.stock),
      log: (await client.xrange(k.orders, '-', '+')).map(([, f]) => (f[0] === 'event' ? f[1] : 'order')),
      state: (await client.hget(k.states, orderId))?.[0] ?? null,
      deadline: (await client.zscore(k.deadlines, orderId)) !== null,
      dueOn: await on('due', orderId),
      markedOn: await on('settle', productId),
    };
  }

  it("marks each product's work on its own master, the first of the mark tags it serves; a script sent with a wrong guess, or none, still does", async () => {
    const prefix = uniquePrefix('cluster-marks');
    const keys = new KeyLayout(prefix);
    const map = await readSlotMap(client);
    const products = map.productsOnEveryShard(keys);
    // The first mark tag each master serves: what the loops read every pass (markTags).
    const tagOf = (master: string) => MARK_TAGS.find((_, i) => map.masterOfSlot(markSlot(i)) === master)!;
    const tags = new Set(map.masters.map(tagOf));
    expect(tags.size).toBe(3);
    expect(new Set(markTags(client, false))).toEqual(tags);
    // No settler (no DATABASE_URL): the marks stay as the scripts left them.
    const app = await startTestApp({ REDIS_CLUSTER_NODES: cluster.clusterNodes, KEY_PREFIX: prefix });
    try {
      for (const productId of products) {
        const own = tagOf(map.masterOfSlot(calculateSlot(keys.product(productId).stock)));
        const other = [...tags].find((t) => t !== own)!;
        const ids = await sell(app.url, productId, 600_000, ['a', 'b', 'c']);
        expect(await client.zscore(keys.marks(own).settle, productId)).toBe('3');
        for (const id of ids) expect(await client.zscore(keys.marks(own).due, id)).not.toBeNull();
        // Outcomes sent with the guess of another master's tag, and with none.
        const k = keys.product(productId);
        const wrong = String(MARK_TAGS.indexOf(other) + 1);
        expect((await orderOutcome.run(client, orderOutcomeKeys(k), ids[0], 'cancel', '', wrong))[0]).toBe('C');
        expect((await orderOutcome.run(client, orderOutcomeKeys(k), ids[1], 'pay', 'pay-1', ''))[0]).toBe('P');
        expect(await client.zscore(keys.marks(own).settle, productId)).toBe('5');
        expect(await client.zscore(keys.marks(own).due, ids[0])).toBeNull();
        expect(await client.zscore(keys.marks(own).due, ids[1])).toBeNull();
        expect(await client.zscore(keys.marks(own).due, ids[2])).not.toBeNull();
        for (const tag of MARK_TAGS.filter((t) => t !== own))
          expect(await client.zscore(keys.marks(tag).settle, productId)).toBeNull();
      }
    } finally {
      await app.close();
    }
  }, 90_000);

  it('pays, cancels, expires and settles the orders of a product on every shard, each once', async () => {
    const prefix = uniquePrefix('cluster-settle');
    const keys = new KeyLayout(prefix);
    const products = (await readSlotMap(client)).productsOnEveryShard(keys);
    expect(products.length).toBe(3);
    const db = await pg.createDatabase('cluster_settle');
    const app = await startTestApp({
      REDIS_CLUSTER_NODES: cluster.clusterNodes,
      KEY_PREFIX: prefix,
      DATABASE_URL: db,
      EXPIRY_SWEEP_MS: '50',
    });
    try {
      for (const productId of products) {
        const ids = await sell(app.url, productId, 1000, ['a', 'b', 'c', 'd']);
        expect((await pay(app.url, ids[0], 'p')).status).toBe(200);
        expect((await request(app.url, 'POST', `/api/orders/${ids[1]}/cancel`)).status).toBe(200);
      }
      for (const productId of products) {
        const k = keys.product(productId);
        for (let i = 0; (await client.zcard(k.deadlines)) > 0; i++) {
          expect(i).toBeLessThan(100);
          await sleep(50);
        }
        // Paid one stays sold; cancelled and the two expired are back.
        expect(await client.get(k.stock)).toBe('3');
        expect(await waitForSettlement(client, k, 20_000)).not.toBeNull();
        const check = await checkSettled(db, client, k, productId);
        expect(check).toMatchObject({ ok: true, rows: 4 });
        expect(check.byStatus).toEqual({ paid: 1, cancelled: 1, expired: 2 });
      }
    } finally {
      await app.close();
    }
  }, 90_000);

  // While the slot of a shard's marks moves (IMPORTING/MIGRATING), a mark key already gone
  // from the node answers ASK inside a script, after whatever the script wrote before it:
  // the marks are probed, both keys, before the first write (includes/shard-marks.lua).
  it('a purchase while the slot of its shard marks migrates, one mark key gone from the node: nothing half-written, its marks on its own node', async () => {
    const keys = new KeyLayout(uniquePrefix('marks-migrating'));
    const { source, target, productId } = await beside(keys);
    const k = keys.product(productId);
    expect(await resetPlainSale(client as unknown as Redis, k, 5, 5)).toEqual(['OK', 1]);
    // Another product's work is marked on the source; no reservation is open, so its
    // due index is not there: a key the node no longer has, as if MIGRATEd already.
    await client.zadd(keys.marks(MARK_TAGS[0]).settle, 1, 'other');
    expect(await client.exists(keys.marks(MARK_TAGS[0]).due)).toBe(0);
    const orderId = `${productId}.00000000-0000-4000-8000-000000000001`;
    await beginMove(markSlot(0), source, target);
    let error = '';
    try {
      await purchase.run(client, purchaseKeys(k), 'u1', 1, orderId, '', '', OUTCOME_TTL_MS, '', '', '', '1');
    } catch (err) {
      error = String(err);
    } finally {
      await callOffMove(markSlot(0), source, target);
    }
    const written = { stock: '4', log: ['order'], state: 'R', deadline: true, dueOn: [source], markedOn: [source] };
    const nothing = { stock: '5', log: [], state: null, deadline: false, dueOn: [], markedOn: [] };
    expect({ error, ...(await traces(keys, k, productId, orderId)) }).toEqual(
      error === '' ? { error, ...written } : { error: expect.stringMatching(/\S/), ...nothing },
    );
  }, 60_000);

  it('a payment while the slot of its shard marks migrates, the due index MIGRATEd and the settle marks not yet: paid with its event, or nothing', async () => {
    const keys = new KeyLayout(uniquePrefix('marks-migrating-pay'));
    const { source, target, productId } = await beside(keys);
    const k = keys.product(productId);
    const marks = keys.marks(MARK_TAGS[0]);
    expect(await resetPlainSale(client as unknown as Redis, k, 5, 5)).toEqual(['OK', 1]);
    const orderId = `${productId}.00000000-0000-4000-8000-000000000002`;
    expect(
      await purchase.run(client, purchaseKeys(k), 'u1', 1, orderId, '', '', OUTCOME_TTL_MS, '', '', '', '1'),
    ).toEqual(['OK', 4]);
    expect(await admin(source).exists(marks.settle, marks.due)).toBe(2);
    await beginMove(markSlot(0), source, target);
    let error = '';
    try {
      // redis-cli MIGRATEs a slot's keys in batches: the due index has gone, the settle marks not yet.
      const [host, port] = target.split(':');
      await admin(source).call('MIGRATE', host, port, '', 0, 5_000, 'KEYS', marks.due);
      await orderOutcome.run(client, orderOutcomeKeys(k), orderId, 'pay', 'pay-1', '1');
    } catch (err) {
      error = String(err);
    } finally {
      // The reshard ends, and another puts the slot back where it was.
      await endMove(markSlot(0), source, target);
      await moveSlot(markSlot(0), target, source);
    }
    const { dueOn, ...seen } = await traces(keys, k, productId, orderId);
    // The deadline the payment could not take out of the moving index stays there: the
    // sweeper's to drop (src/orders/expiry-sweeper.ts).
    expect(dueOn).toEqual([source]);
    const paid = { stock: '4', log: ['order', 'paid'], state: 'P', deadline: false, markedOn: [source] };
    const nothing = { stock: '4', log: ['order'], state: 'R', deadline: true, markedOn: [source] };
    expect({ error, ...seen }).toEqual(
      error === '' ? { error, ...paid } : { error: expect.stringMatching(/\S/), ...nothing },
    );
  }, 60_000);

  it('through the app: a purchase with an Idempotency-Key while the slot of its shard marks migrates, and its retry, make one order', async () => {
    const prefix = uniquePrefix('marks-migrating-app');
    const keys = new KeyLayout(prefix);
    const { source, target, productId } = await beside(keys);
    const k = keys.product(productId);
    const app = await startTestApp({ REDIS_CLUSTER_NODES: cluster.clusterNodes, KEY_PREFIX: prefix });
    try {
      const put = await request(app.url, 'PUT', `/api/products/${productId}`, {
        json: { stock: 5, perUserLimit: 5, paymentTimeoutMs: 600_000 },
        admin: true,
      });
      expect(put.status).toBe(200);
      await client.zadd(keys.marks(MARK_TAGS[0]).settle, 1, 'other');
      expect(await client.exists(keys.marks(MARK_TAGS[0]).due)).toBe(0);
      const order = { json: { productId, userId: 'a' }, headers: { 'Idempotency-Key': 'key-1' } };
      await beginMove(markSlot(0), source, target);
      let first;
      try {
        first = await request(app.url, 'POST', '/api/orders', order);
      } finally {
        await callOffMove(markSlot(0), source, target);
      }
      const retry = await request(app.url, 'POST', '/api/orders', order);
      // One order for the key, whatever the first answer was; here the script found other marks.
      expect({
        log: await client.xlen(k.orders),
        states: await client.hlen(k.states),
        stock: await client.get(k.stock),
      }).toEqual({ log: 1, states: 1, stock: '4' });
      expect([first.status, retry.status]).toEqual([201, 201]);
      expect(retry.body.orderId).toBe(first.body.orderId);
    } finally {
      await app.close();
    }
  }, 60_000);

  it("a master that serves none of the mark tags' slots sells, is paid, and its reservations expire and its orders settle", async () => {
    const prefix = uniquePrefix('tagless');
    const keys = new KeyLayout(prefix);
    const map = await readSlotMap(client);
    // The master of tag 33's slot, with all its tag slots moved away (21 of its 5,462).
    const tagless = map.masterOfSlot(markSlot(32));
    const other = map.masters.find((m) => m !== tagless)!;
    const tagSlots = MARK_TAGS.map((_, i) => markSlot(i)).filter((slot) => map.masterOfSlot(slot) === tagless);
    const productId = map
      .productsOnEveryShard(keys)
      .find((p) => map.masterOfSlot(calculateSlot(keys.product(p).stock)) === tagless)!;
    const k = keys.product(productId);
    const db = await pg.createDatabase('cluster_tagless');
    for (const slot of tagSlots) await moveSlot(slot, tagless, other);
    try {
      const moved = await readSlotMap(client);
      expect(MARK_TAGS.filter((_, i) => moved.masterOfSlot(markSlot(i)) === tagless)).toEqual([]);
      // Started after the move, so its slot map says so.
      const app = await startTestApp({
        REDIS_CLUSTER_NODES: cluster.clusterNodes,
        KEY_PREFIX: prefix,
        DATABASE_URL: db,
        EXPIRY_SWEEP_MS: '50',
      });
      try {
        const ids = await sell(app.url, productId, 1000, ['a', 'b', 'c']);
        expect((await pay(app.url, ids[0], 'p')).status).toBe(200);
        // The sweeper finds the other two's deadlines in the master's own marks.
        for (let i = 0; (await client.zcard(k.deadlines)) > 0; i++) {
          expect(i).toBeLessThan(100);
          await sleep(50);
        }
        expect(await client.get(k.stock)).toBe('3');
        expect(await waitForSettlement(client, k, 20_000)).not.toBeNull();
        const check = await checkSettled(db, client, k, productId);
        expect(check).toMatchObject({ ok: true, rows: 3 });
        expect(check.byStatus).toEqual({ paid: 1, expired: 2 });
      } finally {
        await app.close();
      }
    } finally {
      for (const slot of tagSlots) await moveSlot(slot, other, tagless);
    }
  }, 90_000);

  // Last: it takes a master away for good.
  it('with one master gone (cluster-require-full-coverage no), the products of the live shards still settle', async () => {
    const keys = new KeyLayout(uniquePrefix('master-gone'), markGuess(client));
    const map = await readSlotMap(client);
    const products = map.productsOnEveryShard(keys);
    for (const node of admins.values()) await node.config('SET', 'cluster-require-full-coverage', 'no');
    const pool = createPool({
      databaseUrl: await pg.createDatabase('cluster_master_gone'),
      pgStatementTimeoutMs: 5_000,
    });
    try {
      await migrate(pool);
      // A settler that was running when the master went: it has marked the prefix settled.
      const settler = new Settler(client, pool, keys, {
        settleBatch: 10,
        settleClaimIdleMs: 10_000,
        settleTrim: false,
      });
      await settler.mark();
      for (const [i, productId] of products.entries()) {
        const k = keys.product(productId);
        expect(await resetPlainSale(client as unknown as Redis, k, 5, 5)).toEqual(['OK', 1]);
        const orderId = `${productId}.00000000-0000-4000-8000-00000000000${i}`;
        const args = ['u', 1, orderId, '', '', OUTCOME_TTL_MS, '', '', '', k.marksGuess] as const;
        expect((await purchase.run(client, purchaseKeys(k), ...args))[0]).toBe('OK');
      }
      const gone = map.masterOfSlot(calculateSlot(keys.product(products[2]).stock));
      // Its admin connection closed first: one left to a node that is gone holds the process (closeClient).
      await closeClient(admin(gone));
      cluster.nodes.find((n) => `127.0.0.1:${n.port}` === gone)!.kill();
      const rows = async () => (await pool.query('SELECT count(*)::int AS n FROM orders')).rows[0].n as number;
      // Each pass meets the shard that is gone: its marks unread, its product unsettled, the
      // others settled. Passes go on for up to 40 s (a bound by the clock, not a count: a
      // pass waits on the client's retries at the node that is gone, longer on a loaded
      // machine), then the assertion says what holds.
      for (const until = Date.now() + 40_000; (await rows()) < 2 && Date.now() < until;) {
        await settler.settleOnce().catch(() => 0);
        await sleep(100);
      }
      expect(await rows()).toBe(2);
      for (const productId of products.slice(0, 2))
        expect(await client.xpending(keys.product(productId).orders, SETTLE_GROUP)).toEqual([0, null, null, null]);
    } finally {
      await pool.end();
    }
  }, 90_000);
});
