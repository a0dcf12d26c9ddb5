/**
 * The audit's Redis: the server `--redis` names, or, when that server is a node of a
 * Redis Cluster (its INFO says `cluster_enabled:1`), ioredis' Cluster client seeded with
 * it, which follows each product's slot. Every key the audit reads belongs to one
 * product (one slot), except the products set, which lives on one node like any key.
 */
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { redisCluster } from '../../src/redis/cluster-nodes';
import { whenReady, type RedisClient } from '../../src/redis/create-client';

/** How long the audit waits for Redis (and a cluster's every master) before it gives up. */
const CONNECT_MS = 10_000;
/** A page's read is small; a Redis that holds one longer is unwell, and the audit says so. */
const COMMAND_MS = 30_000;

/** Fails fast and says why, instead of retrying: a tool run by hand, not a service. */
const OPTIONS = {
  lazyConnect: true,
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  retryStrategy: () => null,
  connectTimeout: CONNECT_MS,
  commandTimeout: COMMAND_MS,
  connectionName: 'seckill-audit',
  // What the app speaks (src/redis/create-client.ts), and no CLIENT SETINFO, which a
  // least-privilege auditor (docs/audit.md) may not run.
  protocol: 2,
  disableClientInfo: true,
} as const satisfies RedisOptions;

export class ConnectionError extends Error {}

/** Connected and ready, or a ConnectionError saying why not in one line. */
export async function connectAudit(url: string): Promise<RedisClient> {
  const probe = new Redis(url, OPTIONS);
  // The socket's own error (ECONNREFUSED, WRONGPASS) says more than the rejection's "Connection is closed.".
  let cause: Error | undefined;
  probe.on('error', (err: Error) => (cause ??= err));
  let clustered: boolean;
  try {
    await probe.connect();
    clustered = /^cluster_enabled:1\r?$/m.test(await probe.info('cluster'));
  } catch (err) {
    probe.disconnect();
    throw new ConnectionError(`cannot read Redis at ${redact(url)}: ${(cause ?? (err as Error)).message}`);
  }
  if (!clustered) return probe;
  probe.disconnect();
  const seed = redisCluster(url);
  const cluster = new Cluster(seed.nodes.slice(), {
    enableOfflineQueue: false,
    enableAutoPipelining: false,
    // No periodic refresh: ioredis' timer can outlive quit() (src/redis/create-client.ts).
    slotsRefreshInterval: 0,
    scaleReads: 'master',
    redisOptions: {
      ...OPTIONS,
      lazyConnect: false,
      ...(seed.username ? { username: seed.username } : {}),
      ...(seed.password ? { password: seed.password } : {}),
      ...(seed.tls ? { tls: {} } : {}),
    },
  });
  cluster.on('error', () => undefined);
  cluster.on('+node', (node: Redis) => {
    if (node.status === 'wait') node.connect().catch(() => undefined);
  });
  if (!(await whenReady(cluster, CONNECT_MS))) {
    cluster.disconnect();
    throw new ConnectionError(`the Redis Cluster at ${redact(url)} was not ready within ${CONNECT_MS} ms`);
  }
  return cluster;
}

export async function closeAudit(client: RedisClient): Promise<void> {
  if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
  else client.disconnect();
}

export function redact(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//***@');
}
