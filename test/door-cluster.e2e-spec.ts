import { KeyLayout } from '../src/redis/key-layout';
import { request, startTestApp } from './helpers/app';
import { readSlotMap, uniquePrefix, useTestCluster } from './helpers/redis';

/**
 * The door on a Redis Cluster: the window judged by the clock of the shard that holds
 * the product (TIME in the same MULTI as the stock), the waiting room and its passes
 * beside the sale under its hash tag, for a product on every master and two app
 * instances, under a lock strategy and the lock-free script.
 */
describe('the door on a Redis Cluster', () => {
  const shared = useTestCluster();

  it.each(['fenced', 'atomic'])(
    '%s: window and waiting room on every shard, across two instances',
    async (strategy) => {
      const prefix = uniquePrefix(`cluster-door-${strategy}`);
      const keys = new KeyLayout(prefix);
      const products = (await readSlotMap(shared.client)).productsOnEveryShard(keys);
      const env = { REDIS_CLUSTER_NODES: shared.cluster.clusterNodes, KEY_PREFIX: prefix, LOCK_STRATEGY: strategy };
      const [a, b] = [await startTestApp(env), await startTestApp(env)];
      shared.opened(a);
      shared.opened(b);
      for (const productId of products) {
        const later = new Date(Date.now() + 60_000).toISOString();
        const windowed = await request(a.url, 'PUT', `/api/products/${productId}`, {
          json: { stock: 2, startsAt: later, discardOrders: true },
          admin: true,
        });
        expect(windowed.status).toBe(200);
        const early = await request(b.url, 'POST', '/api/orders', { json: { productId, userId: 'u0' } });
        expect(early.body).toMatchObject({ code: 'SALE_NOT_STARTED' });
        expect(await shared.client.xlen(keys.product(productId).orders)).toBe(0);

        const queued = await request(a.url, 'PUT', `/api/products/${productId}`, {
          json: { stock: 2, queue: { admitPerSecond: 100 }, discardOrders: true },
          admin: true,
        });
        expect(queued.status).toBe(200);
        const noPass = await request(b.url, 'POST', '/api/orders', { json: { productId, userId: 'u0' } });
        expect(noPass.body).toMatchObject({ code: 'ADMISSION_REQUIRED' });
        const tickets = [];
        for (const [i, user] of ['u1', 'u2', 'u3'].entries()) {
          const joined = await request(i % 2 ? b.url : a.url, 'POST', `/api/products/${productId}/queue`, {
            json: { userId: user },
          });
          expect(joined.status).toBe(202);
          tickets.push(joined.body);
        }
        expect(tickets.map((t) => t.state)).toEqual(['admitted', 'admitted', 'waiting']);
        for (const [i, user] of ['u1', 'u2'].entries()) {
          const bought = await request(i % 2 ? a.url : b.url, 'POST', `/api/products/${productId}/orders`, {
            json: { userId: user },
            headers: { 'admission-pass': tickets[i].pass as string },
          });
          expect(bought.status).toBe(201);
        }
        const last = await request(a.url, 'GET', `/api/products/${productId}/queue/${tickets[2].ticket as string}`);
        expect(last.body.state).toBe('sold_out');
        expect(await shared.client.xlen(keys.product(productId).orders)).toBe(2);
        expect(await shared.client.get(keys.product(productId).stock)).toBe('0');
      }
    },
    60_000,
  );
});
