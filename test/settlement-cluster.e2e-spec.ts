import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster } from 'ioredis';
import { checkSettled, waitForSettlement } from '../bench/settled';
import { PrivatePostgres, startPrivatePostgres } from '../harness/postgres';
import { createRedisCluster } from '../src/redis/create-client';
import calculateSlot from 'cluster-key-slot';
import { KeyLayout } from '../src/redis/key-layout';
import { orderOutcome, orderOutcomeKeys } from '../src/redis/lua-scripts';
import { MARK_TAGS, markSlot, markTags } from '../src/redis/shard-marks';
import { pay, request, startTestApp } from './helpers/app';
import { clusterReady, readSlotMap, startTestCluster, TestCluster, uniquePrefix } from './helpers/redis';

const hostPort = (s: string) => {
  const [host, port] = s.split(':');
  return { host, port: Number(port) };
};

/**
 * Settlement on a Redis Cluster: each product's order stream, states and deadlines live
 * on its own shard (one hash tag), the settler's consumer group and the sweeper follow
 * them there; the products' list is one key of its own. A product on every master.
 */
describe('settlement on a Redis Cluster', () => {
  let cluster: TestCluster;
  let pg: PrivatePostgres;
  let client: Cluster;

  beforeAll(async () => {
    [cluster, pg] = await Promise.all([startTestCluster({ masters: 3 }), startPrivatePostgres()]);
    client = createRedisCluster({ nodes: cluster.clusterNodes.split(',').map(hostPort), tls: false }, 'test');
    await clusterReady(client);
  }, 60_000);

  afterAll(async () => {
    client?.disconnect();
    await Promise.all([cluster?.stop(), pg?.remove()]);
  });

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
        const put = await request(app.url, 'PUT', `/api/products/${productId}`, {
          json: { stock: 4, paymentTimeoutMs: 600_000 },
          admin: true,
        });
        expect(put.status).toBe(200);
        const ids: string[] = [];
        for (const user of ['a', 'b', 'c']) {
          const res = await request(app.url, 'POST', '/api/orders', { json: { productId, userId: user } });
          expect(res.status).toBe(201);
          ids.push(res.body.orderId as string);
        }
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
        const put = await request(app.url, 'PUT', `/api/products/${productId}`, {
          json: { stock: 4, paymentTimeoutMs: 1000 },
          admin: true,
        });
        expect(put.status).toBe(200);
        const ids: string[] = [];
        for (const user of ['a', 'b', 'c', 'd']) {
          const res = await request(app.url, 'POST', '/api/orders', { json: { productId, userId: user } });
          expect(res.status).toBe(201);
          ids.push(res.body.orderId as string);
        }
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
});
