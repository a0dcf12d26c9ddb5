import { Redis } from 'ioredis';
import { createRedisCluster } from '../src/redis/create-client';
import { checkRedisVersion, parseRedisVersion } from '../src/redis/redis-version';
import { closeClient, clusterReady, startTestCluster, startTestRedis } from './helpers/redis';

/**
 * The version check against the real redis-server installed here (7.0.15), standalone and
 * on a cluster: it reads the version and lets the app start. That it refuses an older
 * Redis is proven only by src/redis/redis-version.spec.ts on INFO text: no Redis 6 is
 * installed, and a real 7.0 cannot be made to report another version.
 */
describe('checkRedisVersion on a real Redis', () => {
  it('reads the standalone server’s version and accepts it', async () => {
    const redis = await startTestRedis();
    const client = new Redis(redis.url);
    try {
      expect(parseRedisVersion(await client.info('server'))?.[0]).toBeGreaterThanOrEqual(7);
      expect(await checkRedisVersion(client)).toBeNull();
    } finally {
      await closeClient(client);
      await redis.stop();
    }
  });

  it('asks one node of a cluster and accepts it', async () => {
    const cluster = await startTestCluster({ masters: 3 });
    const client = createRedisCluster(
      {
        nodes: cluster.clusterNodes.split(',').map((n) => ({ host: '127.0.0.1', port: Number(n.split(':')[1]) })),
        tls: false,
      },
      'version',
    );
    try {
      await clusterReady(client);
      expect(await checkRedisVersion(client)).toBeNull();
    } finally {
      await client.quit();
      await cluster.stop();
    }
  }, 60_000);
});
