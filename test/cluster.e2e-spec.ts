import calculateSlot from 'cluster-key-slot';
import { type Cluster, Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LockStrategyName } from '../src/config/app-config';
import { CLUSTER_STATUS_TTL_MS } from '../src/health/health.controller';
import { ReleaseSubscriber, releasedChannel } from '../src/locks/release-subscriber';
import { createRedisCluster, whenReady } from '../src/redis/create-client';
import { KeyLayout } from '../src/redis/key-layout';
import { releaseLock } from '../src/redis/lua-scripts';
import { moved, WatchConnections } from '../src/redis/watch-connections';
import { request, startSale, startTestApp, TestApp } from './helpers/app';
import {
  clusterClient,
  failoverPair,
  clusterReady,
  readSlotMap,
  relearnedMap,
  SlotMap,
  startTestCluster,
  startTestRedis,
  TestCluster,
  TestRedis,
  takeOver,
  uniquePrefix,
  until,
} from './helpers/redis';

/**
 * The app on a real local Redis Cluster of three masters with a replica each (private
 * redis-server processes joined with `redis-cli --cluster create`): products on every shard, two app
 * instances racing for each, and the verdict read from the cluster itself.
 */
const STOCK = 40;
const BUYERS_PER_PRODUCT = 150;

let cluster: TestCluster;
/** For reading the verdict from Redis, not from the apps' answers. */
let client: Cluster;
/** `host:port` of the master serving each slot, from the cluster itself. */
let slots: SlotMap;
let masterOfSlot: (slot: number) => string;
let masters: string[];

beforeAll(async () => {
  cluster = await startTestCluster({ masters: 3, replicas: 1 });
  client = createRedisCluster(
    { nodes: cluster.clusterNodes.split(',').map(hostPort), tls: false },
    'test cluster client',
  );
  await clusterReady(client);
  slots = await readSlotMap(client);
  masters = [...slots.masters];
  masterOfSlot = slots.masterOfSlot;
}, 60_000);

afterAll(async () => {
  await client?.quit();
  await cluster?.stop();
});

function productsOnEveryShard(keys: KeyLayout): string[] {
  return slots.productsOnEveryShard(keys);
}

describe('Redis Cluster: three masters', () => {
  it('serves every slot from three masters, and /health lists each one with its replica', async () => {
    expect(new Set(masters).size).toBe(3);
    const app = await startTestApp({ REDIS_CLUSTER_NODES: cluster.clusterNodes, KEY_PREFIX: uniquePrefix('health') });
    try {
      const res = await request(app.url, 'GET', '/health');
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'ok', redis: 'up', cluster: { state: 'ok', slotsCovered: 16_384 } });
      const listed = (
        res.body.cluster.masters as { node: string; status: string; slots: number; replicas: number }[]
      ).map(({ node, status, replicas }) => [node, status, replicas]);
      expect(listed.sort()).toEqual(masters.map((m) => [m, 'up', 1]).sort());
    } finally {
      await app.close();
    }
  });

  it('wakes a waiter with the release message on the lock key’s own shard (SPUBLISH/SSUBSCRIBE), for products on every shard', async () => {
    const keys = new KeyLayout(uniquePrefix('release'));
    const products = productsOnEveryShard(keys);
    const subscriber = ReleaseSubscriber.of(client);
    try {
      for (const id of products) {
        const lock = keys.product(id).lock;
        const channel = releasedChannel(lock);
        await client.set(lock, 'owner', 'PX', 60_000);
        await subscriber.join(channel);
        const before = subscriber.wakeups;
        // A wait far longer than the test: only the message can end it in time.
        const woken = subscriber.wait(channel, subscriber.generation(channel), 600_000);
        expect(await releaseLock.run(client, [lock], 'owner', channel)).toBe(1);
        await woken;
        expect(subscriber.wakeups).toBe(before + 1);
        subscriber.leave(channel);
      }
    } finally {
      await subscriber.close();
    }
  });

  it('lends optimistic WATCH connections on the master that serves the product', async () => {
    const keys = new KeyLayout(uniquePrefix('watch'));
    const connections = new WatchConnections(client, { enableOfflineQueue: false, enableAutoPipelining: false }, 2);
    try {
      for (const id of productsOnEveryShard(keys)) {
        const key = keys.product(id).stock;
        const port = await connections.use(
          key,
          performance.now() + 5_000,
          () => new Error('timed out'),
          async (c) => {
            await c.watch(key);
            await c.unwatch();
            return c.options.port;
          },
        );
        expect(port).not.toBe(moved);
        expect(`127.0.0.1:${String(port)}`).toBe(masterOfSlot(calculateSlot(key)));
      }
    } finally {
      await connections.close();
    }
  });

  describe('two app instances racing for products on every shard', () => {
    let redlockNodes: TestRedis[] = [];
    beforeAll(async () => {
      redlockNodes = await Promise.all([1, 2, 3].map(() => startTestRedis()));
    });
    afterAll(async () => {
      await Promise.all(redlockNodes.map((n) => n.stop()));
    });

    it.each<LockStrategyName>(['fenced', 'lock', 'reentrant', 'redlock', 'atomic', 'optimistic'])(
      '%s: no oversell, every 201 is an order in Redis, every invariant holds on every shard',
      async (strategy) => {
        const prefix = uniquePrefix(`race-${strategy}`);
        const keys = new KeyLayout(prefix);
        const env = {
          REDIS_CLUSTER_NODES: cluster.clusterNodes,
          KEY_PREFIX: prefix,
          LOCK_STRATEGY: strategy,
          // Exclusion and accounting are under test here, not latency: a busy machine
          // must not turn into LOCK_TIMEOUT answers.
          LOCK_WAIT_MS: '30000',
          ...(strategy === 'redlock' ? { REDLOCK_URLS: redlockNodes.map((n) => n.url).join(',') } : {}),
        };
        const apps: TestApp[] = [await startTestApp(env), await startTestApp(env)];
        try {
          const products = productsOnEveryShard(keys);
          for (const id of products) await startSale(apps[0].url, id, STOCK, 1);
          // The other instance sees the sales the first one started.
          for (const id of products) {
            expect((await request(apps[1].url, 'GET', `/api/products/${id}`)).body).toMatchObject({ stock: STOCK });
          }
          // The admin's catalog (one SSCAN, then each product read on its own shard) lists them all.
          const catalog = await request(apps[1].url, 'GET', '/api/products', { admin: true });
          expect(catalog.status).toBe(200);
          expect(catalog.body.items.map((p: { id: string }) => p.id).sort()).toEqual([...products].sort());

          const answers = await Promise.all(
            products.flatMap((productId) =>
              Array.from({ length: BUYERS_PER_PRODUCT }, async (_, i) => {
                const res = await request(apps[i % 2].url, 'POST', '/api/orders', {
                  json: { productId, userId: `buyer-${i}`, quantity: 1 },
                });
                return { productId, status: res.status, code: res.body.code, orderId: res.body.orderId };
              }),
            ),
          );

          for (const id of products) {
            const mine = answers.filter((a) => a.productId === id);
            const sold = mine.filter((a) => a.status === 201);
            // Every buyer got 201 or SOLD_OUT: none was lost to an error on the cluster.
            expect(mine.filter((a) => a.status !== 201).map((a) => a.code)).toEqual(
              Array(BUYERS_PER_PRODUCT - sold.length).fill('SOLD_OUT'),
            );
            expect(sold).toHaveLength(STOCK);

            const k = keys.product(id);
            const [stock, meta, buyers, stream] = await Promise.all([
              client.get(k.stock),
              client.hgetall(k.meta),
              client.hgetall(k.buyers),
              client.xrange(k.orders, '-', '+'),
            ]);
            expect(Number(stock)).toBe(0);
            expect(Number(meta.initialStock)).toBe(STOCK);
            expect(stream).toHaveLength(STOCK);
            const streamIds = new Set(stream.map(([, fields]) => fields[fields.indexOf('orderId') + 1]));
            expect(sold.every((a) => streamIds.has(a.orderId))).toBe(true);
            expect(Object.values(buyers).every((n) => Number(n) === 1)).toBe(true);
            expect(Object.keys(buyers)).toHaveLength(STOCK);
          }
          // The load really was spread: each product's keys live on a different master.
          expect(new Set(products.map((id) => masterOfSlot(calculateSlot(keys.product(id).stock)))).size).toBe(3);

          // Each product retired (its check and deletion one script on its own shard, under
          // this strategy's exclusion), then unlisted (the products set, a key of its own slot).
          for (const id of products) {
            const gone = await request(apps[1].url, 'DELETE', `/api/products/${id}?discardOrders=true`, {
              admin: true,
            });
            expect(gone.body).toMatchObject({ id, discardedOrders: STOCK });
            const k = keys.product(id);
            expect(await client.exists(k.meta, k.stock, k.buyers, k.orders, k.states, k.deadlines)).toBe(0);
          }
          expect(await client.scard(keys.products)).toBe(0);
          expect((await request(apps[0].url, 'GET', '/api/products', { admin: true })).body.items).toEqual([]);
        } finally {
          await Promise.all(apps.map((a) => a.close()));
        }
      },
      120_000,
    );
  });

  it('is ready only once every master is connected, and then runs commands for every shard at once', async () => {
    const fresh = createRedisCluster({ nodes: cluster.clusterNodes.split(',').map(hostPort), tls: false }, 'fresh');
    try {
      expect(await whenReady(fresh, 10_000)).toBe(true);
      const keys = new KeyLayout(uniquePrefix('cold'));
      const ids = productsOnEveryShard(keys);
      const results = await Promise.allSettled(
        Array.from({ length: 600 }, (_, i) => fresh.eval('return 1', 1, keys.product(ids[i % ids.length]).stock)),
      );
      expect(results.filter((r) => r.status === 'rejected').map((r) => String(r.reason))).toEqual([]);
    } finally {
      await fresh.quit();
    }
  });

  it('/health names a master that does not answer as down (503), whichever node it asks; /health/ready stays 200, degraded', async () => {
    const app = await startTestApp({ REDIS_CLUSTER_NODES: cluster.clusterNodes, KEY_PREFIX: uniquePrefix('hung') });
    const hung = cluster.nodes.find((n) => n.role === 'master')!;
    try {
      // One look at the cluster answers /health for CLUSTER_STATUS_TTL_MS: the one its
      // start-up took is over once that long has passed after it answered.
      await request(app.url, 'GET', '/health');
      expect(await request(app.url, 'GET', '/health/ready')).toMatchObject({ status: 200, body: { status: 'ready' } });
      await sleep(CLUSTER_STATUS_TTL_MS);
      // Paused for one look only: shorter than the cluster's node timeout (2 s), so no
      // failover starts and the cluster still says ok. Both routes share that look.
      hung.pause();
      const [res, ready] = await Promise.all([
        request(app.url, 'GET', '/health'),
        request(app.url, 'GET', '/health/ready'),
      ]).finally(() => hung.resume());
      expect(res.status).toBe(503);
      const statuses = Object.fromEntries(
        (res.body.cluster.masters as { node: string; status: string }[]).map((m) => [m.node, m.status]),
      );
      expect(statuses).toEqual(
        Object.fromEntries(masters.map((m) => [m, m === `127.0.0.1:${hung.port}` ? 'down' : 'up'])),
      );
      // The other masters' products still sell, and every instance sees the same cluster:
      // readiness keeps this one in service and says what is missing.
      const hungSlots = (res.body.cluster.masters as { node: string; slots: number }[]).find(
        (m) => m.node === `127.0.0.1:${hung.port}`,
      )!.slots;
      expect(ready.status).toBe(200);
      expect(ready.body).toMatchObject({
        status: 'degraded',
        redis: 'down',
        unserved: { masters: [`127.0.0.1:${hung.port}`], slots: hungSlots },
      });
    } finally {
      await app.close();
      await cluster.waitForState('ok');
    }
  });

  // A graceful failover makes the master hold its clients' writes while it hands over,
  // then answer each with MOVED once it is a replica: the writes ran nothing there and go
  // to the new master, a node the app may not have a connection to yet. Held here by
  // CLIENT PAUSE WRITE on the master and a TAKEOVER by its replica: deterministic.
  it.each([
    ['when the app sends them on at once', false],
    ['when the app relearns the slot map first (the old master then serves no slot)', true],
  ])(
    'writes held by a master that a failover demotes each run once on the new master, none "Connection is closed": %s',
    async (_, relearnFirst) => {
      const keys = new KeyLayout(uniquePrefix('demoted'));
      // Each case on a shard of its own: the other's failover left its old master a replica.
      const key = keys.product(productsOnEveryShard(keys)[relearnFirst ? 1 : 0]).stock;
      const { slot, master, replica } = await failoverPair(cluster, key);
      const own = await clusterClient(cluster);
      const from = new Redis(master.url);
      const to = new Redis(replica.url);
      try {
        await own.set(key, '0');
        await from.client('PAUSE', '30000', 'WRITE');
        const writes = Array.from({ length: 10 }, () =>
          own.incr(key).then(String, (err: Error) => `error: ${err.message}`),
        );
        await until('the writes to wait on the paused master', async () =>
          /flags=b\b.*cmd=incr\b/.test(String(await from.client('LIST'))) ? true : undefined,
        );
        await takeOver(cluster, replica, slot);
        // Had the refresh dropped the old master's connection, its writes were cut ("Connection is closed.").
        if (relearnFirst) await relearnedMap(own, replica.port);
        await from.client('UNPAUSE');
        const answers = await Promise.all(writes);
        expect(answers.filter((a) => a.startsWith('error'))).toEqual([]);
        expect(answers.map(Number).sort((a, b) => a - b)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
        expect(await to.get(key)).toBe('10');
      } finally {
        await from.client('UNPAUSE').catch(() => undefined);
        await Promise.all([from.quit(), to.quit(), own.quit()]);
      }
    },
    60_000,
  );

  // Last: it kills a master of the suite's cluster.
  it('a master killed: its replica takes over, the release subscriber lives on and wakes a waiter on the promoted master', async () => {
    const keys = new KeyLayout(uniquePrefix('failover'));
    const [id, elsewhere] = productsOnEveryShard(keys);
    const lock = keys.product(id).lock;
    const channel = releasedChannel(lock);
    const slot = calculateSlot(lock);
    const subscriber = ReleaseSubscriber.of(client);
    try {
      // Subscribed on another shard only: the victim's sharded subscriber is not started yet.
      await subscriber.join(releasedChannel(keys.product(elsewhere).lock));
      const victim = await cluster.masterOfSlot(slot);
      victim.kill();
      await victim.exited;
      // A buyer starts waiting on the dead master's shard before the failover: ioredis
      // fails to connect its subscriber there and emits 'error' on the subscriber client,
      // which would end the process if nobody listened. The join itself may fail.
      const early = await Promise.race([
        subscriber.join(channel).then(
          () => 'joined',
          (err: Error) => `refused: ${err.message}`,
        ),
        sleep(3_000).then(() => 'pending'),
      ]);
      expect(early).not.toBe('pending');
      const promoted = await until('the replica to take over the slot', async () => {
        const now = await cluster.masterOfSlot(slot).catch(() => undefined);
        return now && now.port !== victim.port ? now : undefined;
      });
      await cluster.waitForState('ok');
      // A join refused while the master was down left nothing behind: joining again subscribes.
      if (early !== 'joined') await subscriber.join(channel);
      // The subscriber follows the slot to its new master (ioredis re-sends SSUBSCRIBE there).
      const admin = new Redis(promoted.url);
      try {
        await until('the waiter to be subscribed on the promoted master', async () => {
          const [, count] = (await admin.pubsub('SHARDNUMSUB', channel)) as [string, number];
          return count > 0 || undefined;
        });
        await until('the cluster client to write to the promoted master', () =>
          client.set(lock, 'owner', 'PX', 60_000).then(
            () => true,
            () => undefined,
          ),
        );
        const woken = subscriber.wait(channel, subscriber.generation(channel), 600_000);
        expect(await releaseLock.run(client, [lock], 'owner', channel)).toBe(1);
        await woken;
      } finally {
        await admin.quit();
      }
    } finally {
      await subscriber.close();
    }
  }, 60_000);
});

describe('Redis Cluster without replicas: a master killed', () => {
  it('/health/ready turns 503 once the cluster says fail, when every node refuses every command (CLUSTERDOWN)', async () => {
    const small = await startTestCluster({ masters: 3 });
    const prefix = uniquePrefix('clusterdown');
    const app = await startTestApp({ REDIS_CLUSTER_NODES: small.clusterNodes, KEY_PREFIX: prefix });
    const admin = new Redis(small.nodes[0].url);
    try {
      const map = await readSlotMap(admin);
      const products = map.productsOnEveryShard(new KeyLayout(prefix));
      for (const id of products) await startSale(app.url, id, 5);
      const victim = small.nodes.find((n) => n.port !== small.nodes[0].port && n.role === 'master')!;
      victim.kill();
      await victim.exited;
      // No replica to promote: once the others agree it failed, cluster_state is fail.
      await small.waitForState('fail');
      await sleep(CLUSTER_STATUS_TTL_MS);
      const ready = await request(app.url, 'GET', '/health/ready');
      expect(ready.status).toBe(503);
      expect(ready.headers.get('retry-after')).toBe('1');
      expect(ready.body).toMatchObject({
        status: 'unavailable',
        reason: expect.stringContaining('cluster_state is fail'),
        unserved: { masters: [`127.0.0.1:${victim.port}`] },
      });
      // Which is the truth: the products of the masters still running are refused too.
      const live = products.filter(
        (id) => map.masterOfSlot(calculateSlot(`${prefix}{p:${id}}:stock`)) !== `127.0.0.1:${victim.port}`,
      );
      expect(live).toHaveLength(2);
      for (const id of live) {
        const res = await request(app.url, 'POST', '/api/orders', { json: { productId: id, userId: 'ann' } });
        expect({ id, status: res.status, code: res.body.code }).toEqual({ id, status: 503, code: 'REDIS_UNAVAILABLE' });
      }
      expect((await request(app.url, 'GET', '/health/live')).status).toBe(200);
    } finally {
      await admin.quit();
      await app.close();
      await small.stop();
    }
  }, 60_000);
});

function hostPort(entry: string): { host: string; port: number } {
  const at = entry.lastIndexOf(':');
  return { host: entry.slice(0, at), port: Number(entry.slice(at + 1)) };
}
