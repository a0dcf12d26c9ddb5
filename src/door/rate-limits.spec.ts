import calculateSlot from 'cluster-key-slot';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { closeClient, startTestCluster, startTestRedis, TestCluster, TestRedis } from '../../test/helpers/redis';
import { closeRedisClient, createAppRedisClient, RedisClient, whenReady } from '../redis/create-client';
import { RateLimits } from './rate-limits';

/**
 * rate-limiter-flexible's RateLimiterRedis on the app's own ioredis 6 clients: a
 * standalone Redis and a Redis Cluster (its script touches one key, so any slot).
 */
describe('RateLimits (rate-limiter-flexible on ioredis 6)', () => {
  let single: TestRedis;
  let cluster: TestCluster;
  beforeAll(async () => {
    [single, cluster] = await Promise.all([startTestRedis(), startTestCluster({ masters: 3 })]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([single?.stop(), cluster?.stop()]);
  });

  async function clientFor(kind: 'standalone' | 'cluster'): Promise<RedisClient> {
    const client =
      kind === 'standalone'
        ? createAppRedisClient({ redisUrl: single.url, redisCluster: null })
        : createAppRedisClient({
            redisUrl: null,
            redisCluster: { nodes: cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })), tls: false },
          });
    expect(await whenReady(client, 10_000)).toBe(true);
    return client;
  }

  it.each(['standalone', 'cluster'] as const)('counts a fixed window per key in Redis (%s)', async (kind) => {
    const client = await clientFor(kind);
    try {
      const limits = new RateLimits(client, `rl-${kind}:`, 'ip', { count: 2, windowMs: 30_000 });
      // Keys in many slots, so on the cluster every master counts some.
      const addresses = Array.from({ length: 12 }, (_, i) => `10.0.0.${i}`);
      const slots = new Set(addresses.map((a) => calculateSlot(`rl-${kind}:rate:ip:${a}`)));
      expect(slots.size).toBeGreaterThan(6);
      for (const address of addresses) {
        expect(await limits.take(address)).toBeNull();
        expect(await limits.take(address)).toBeNull();
        const refused = await limits.take(address);
        expect(refused?.headers).toEqual({
          'retry-after': expect.stringMatching(/^(29|30)$/),
          'ratelimit-policy': '"ip";q=2;w=30',
          ratelimit: expect.stringMatching(/^"ip";r=0;t=(29|30)$/),
        });
      }
      // The count and its TTL, as Redis holds them (read from the node that serves the key).
      const reader = kind === 'standalone' ? new Redis(single.url) : null;
      const key = `rl-${kind}:rate:ip:10.0.0.0`;
      const [count, ttl] = reader
        ? await Promise.all([reader.get(key), reader.pttl(key)])
        : await Promise.all([client.get(key), client.pttl(key)]);
      expect(Number(count)).toBeGreaterThanOrEqual(3);
      expect(ttl).toBeGreaterThan(20_000);
      expect(ttl).toBeLessThanOrEqual(30_000);
      await closeClient(reader ?? undefined);
    } finally {
      await closeRedisClient(client);
    }
  });

  it('keeps a window of no whole number of seconds to the millisecond (20/500ms is per half second)', async () => {
    const client = await clientFor('standalone');
    const reader = new Redis(single.url);
    try {
      for (const windowMs of [300, 1_500]) {
        const limits = new RateLimits(client, `rl-ms-${windowMs}:`, 'ip', { count: 2, windowMs });
        const key = `rl-ms-${windowMs}:rate:ip:10.0.0.1`;
        expect(await limits.take('10.0.0.1')).toBeNull();
        expect(await limits.take('10.0.0.1')).toBeNull();
        const refused = await limits.take('10.0.0.1');
        // No `w`: the policy's window is a whole number of seconds or nothing.
        expect(refused?.headers).toEqual({
          'retry-after': windowMs < 1_000 ? '1' : expect.stringMatching(/^[12]$/),
          'ratelimit-policy': '"ip";q=2',
          ratelimit: expect.stringMatching(/^"ip";r=0;t=[12]$/),
        });
        // The window Redis keeps is the one written: not floored to a second, and never none.
        const ttl = await reader.pttl(key);
        expect(ttl).toBeGreaterThan(windowMs === 300 ? 0 : 1_000);
        expect(ttl).toBeLessThanOrEqual(windowMs);
        // Once Redis has expired it (and this instance's memory of the refusal, which ends
        // with the PTTL it was given), a new window starts.
        while ((await reader.exists(key)) === 1) await sleep(20);
        while ((await limits.take('10.0.0.1')) !== null) await sleep(5);
        expect(await reader.get(key)).toBe('1');
      }
    } finally {
      await closeClient(reader);
      await closeRedisClient(client);
    }
  });

  it('lets two limiters (two app instances) on one Redis share the count', async () => {
    const [a, b] = await Promise.all([clientFor('cluster'), clientFor('cluster')]);
    try {
      const limit = { count: 3, windowMs: 60_000 };
      const first = new RateLimits(a, 'rl-shared:', 'user', limit);
      const second = new RateLimits(b, 'rl-shared:', 'user', limit);
      const answers = [];
      for (const limiter of [first, second, first, second, first]) answers.push((await limiter.take('alice')) === null);
      expect(answers).toEqual([true, true, true, false, false]);
    } finally {
      await Promise.all([closeRedisClient(a), closeRedisClient(b)]);
    }
  });
});
