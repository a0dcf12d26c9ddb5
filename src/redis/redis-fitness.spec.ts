import { Redis } from 'ioredis';
import { closeClient, startTestCluster, TestCluster } from '../../test/helpers/redis';
import { loadConfig } from '../config/app-config';
import { closeRedisClient, createRedisCluster, whenReady } from './create-client';
import { checkEvictionPolicy, clusterNodeAddresses } from './redis-fitness';

/** The start-up eviction check on a real Redis Cluster of 3 masters with a replica each, freshly made. */
describe('checkEvictionPolicy on a Redis Cluster', () => {
  let cluster: TestCluster;
  let admins: Redis[];

  beforeAll(async () => {
    cluster = await startTestCluster({ masters: 3, replicas: 1 });
    admins = cluster.nodes.map((node) => new Redis(node.url));
  }, 60_000);

  afterAll(async () => {
    await Promise.all((admins ?? []).map(closeClient));
    await cluster?.stop();
  });

  async function check() {
    const client = createRedisCluster(
      loadConfig({ REDIS_CLUSTER_NODES: cluster.clusterNodes, ADMIN_TOKEN: 'a-long-enough-admin-token' }).redisCluster!,
      'check',
    );
    try {
      expect(await whenReady(client, 10_000)).toBe(true);
      return await checkEvictionPolicy(client);
    } finally {
      await closeRedisClient(client);
    }
  }

  it('lists every node CLUSTER NODES names, replicas included', async () => {
    const addresses = clusterNodeAddresses(String(await admins[0].call('CLUSTER', 'NODES')));
    expect(addresses.sort()).toEqual(cluster.nodes.map((n) => `127.0.0.1:${n.port}`).sort());
  });

  it("finds a replica's evicting policy before any write (Redis 7.0 leaves such a replica out of CLUSTER SLOTS)", async () => {
    const replica = cluster.nodes.findIndex((n) => n.role === 'replica');
    await admins[replica].config('SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      const found = await check();
      expect(found.unanswered).toEqual([]);
      expect(found.problems).toEqual([
        expect.stringContaining(`Redis 127.0.0.1:${cluster.nodes[replica].port} has maxmemory-policy allkeys-lru`),
      ]);
    } finally {
      await admins[replica].config('SET', 'maxmemory-policy', 'noeviction');
    }
  });

  it("keeps a master's problem when another node does not answer, and names that node apart", async () => {
    const master = cluster.nodes.findIndex((n) => n.role === 'master');
    const replica = cluster.nodes.findIndex((n) => n.role === 'replica' && n !== cluster.nodes[master]);
    await admins[master].config('SET', 'maxmemory-policy', 'volatile-lru');
    cluster.nodes[replica].pause();
    try {
      const found = await check();
      expect(found.problems).toEqual([
        expect.stringContaining(`Redis 127.0.0.1:${cluster.nodes[master].port} has maxmemory-policy volatile-lru`),
      ]);
      expect(found.unanswered).toEqual([expect.stringContaining(`127.0.0.1:${cluster.nodes[replica].port}`)]);
    } finally {
      cluster.nodes[replica].resume();
      await admins[master].config('SET', 'maxmemory-policy', 'noeviction');
    }
  });
});
