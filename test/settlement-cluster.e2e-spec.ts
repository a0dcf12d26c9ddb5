import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster } from 'ioredis';
import { checkSettled, waitForSettlement } from '../bench/settled';
import { PrivatePostgres, startPrivatePostgres } from '../harness/postgres';
import { createRedisCluster } from '../src/redis/create-client';
import { KeyLayout } from '../src/redis/key-layout';
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
