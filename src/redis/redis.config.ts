import { ConfigError, ConfigOf, defaulted, Env, flag, int, section, setting } from '../settings/setting';
import { RedisClusterConfig, redisCluster } from './cluster-nodes';
import { checkRedisUrl } from './redis-url';

const DEFAULT_KEY_PREFIX = 'seckill:';

/**
 * The Redis the app sells on, REDIS_URL (standalone) or REDIS_CLUSTER_NODES (cluster),
 * exactly one of them; what an order's write waits for; the prefix of every key.
 */
export const REDIS_CONFIG = section('redis', {
  redisUrl: setting(
    'REDIS_URL',
    'set by `npm start`',
    '`redis://` or `rediss://` URL; required when running `dist/src/main.js` yourself, unless `REDIS_CLUSTER_NODES` is set',
    (value, env): string | null => (env.REDIS_CLUSTER_NODES?.trim() ? null : checkRedisUrl('REDIS_URL', value)),
  ),
  redisCluster: setting(
    'REDIS_CLUSTER_NODES',
    'unset (set by `npm start -- --cluster K`)',
    "a Redis Cluster's seed nodes, `host:port,host:port,...` (or `redis://[user:pass@]host:port`, `rediss://` for TLS; the URL entries agree on scheme and login): the app uses ioredis' Cluster client. Setting it and `REDIS_URL` is a config error ([Redis Cluster](scaling.md#running-it))",
    (value, env): RedisClusterConfig | null => {
      if (value === undefined) return null;
      if (env.REDIS_URL?.trim()) {
        throw new ConfigError(
          'REDIS_CLUSTER_NODES',
          'and REDIS_URL are both set: set REDIS_URL for one Redis, or REDIS_CLUSTER_NODES for a Redis Cluster, not both',
        );
      }
      return redisCluster(value);
    },
  ),
  // WAIT needs replicas to answer it; more than a handful per master is not a sale's setup.
  redisWaitReplicas: int(
    'REDIS_WAIT_REPLICAS',
    0,
    [0, 16],
    "replicas of the product's master that must acknowledge an order's write (`WAIT`) before it is answered 201; too few within `REDIS_WAIT_TIMEOUT_MS` is 503 `OUTCOME_UNKNOWN`; a master with fewer live replicas than this refuses purchases first, 503 `REDIS_UNAVAILABLE`, nothing written, after the `Idempotency-Key` lookup (a keyed retry gets its acknowledged order back); [scaling.md](scaling.md#failover-what-asynchronous-replication-can-lose)",
  ),
  redisWaitTimeoutMs: int('REDIS_WAIT_TIMEOUT_MS', 500, [1, 60_000], 'how long that `WAIT` may take'),
  // src/redis/redis-fitness.ts checks the policy at boot and in /health.
  redisAllowEviction: flag(
    'REDIS_ALLOW_EVICTION',
    false,
    '`1` lets the app serve on a Redis whose `maxmemory-policy` is not `noeviction`. Without it the app refuses to start there (one line naming the setting) and `/health` answers 503 with `problems: ["eviction"]`: an evictable lock, fencing counter, buyers\' count or `Idempotency-Key` outcome can sell twice. Only for a Redis that can never fill',
  ),
  keyPrefix: {
    ...defaulted(
      'KEY_PREFIX',
      DEFAULT_KEY_PREFIX,
      'prefix of every Redis key; the app only deletes keys under it',
      String,
    ),
    // env[...] and not the trimmed value: an explicit empty prefix is a mistake worth naming.
    read: (_value: string | undefined, env: Env): string => {
      const value = env.KEY_PREFIX ?? DEFAULT_KEY_PREFIX;
      // Braces would break the per-product hash tag that keeps a product's keys in one slot.
      if (!/^[A-Za-z0-9:_.-]{1,64}$/.test(value)) {
        throw new ConfigError('KEY_PREFIX', `must be 1-64 characters of A-Z a-z 0-9 : _ . -, got "${value}"`);
      }
      return value;
    },
  },
});
export type RedisConfig = ConfigOf<typeof REDIS_CONFIG>;
export type { RedisClusterConfig };
