/**
 * The Redis a bench run sells on, behind one seam: the server named by --redis, a
 * private one started for the run, or (--cluster K) a private Redis Cluster of K
 * masters. What the rest of the bench needs from it: the nodes to meter, the env that
 * points the app at it, and a client of its own for setup reads and the verdict.
 */
import { Cluster, Redis } from 'ioredis';
import { startPrivateCluster, startPrivateRedis } from '../harness/redis';
import type { MeteredNode } from './cost';

/** One Redis server: a standalone one, or a cluster master. */
export interface RedisNode {
  /** host:port, as reports name it (never the URL's credentials). */
  readonly name: string;
  readonly url: string;
}

export interface RunRedis {
  /** The servers the data lives on, each metered on its own: one, or every master. */
  readonly nodes: readonly RedisNode[];
  /** Merged into every app's env: REDIS_URL, or REDIS_CLUSTER_NODES. */
  readonly appEnv: Readonly<Record<string, string>>;
  /** Stops what was started for the run (nothing for a Redis the user named). */
  stop(): Promise<void>;
}

/**
 * The bench's own reads and writes: every call names keys of one product only, one
 * hash slot, so a Cluster client serves them as a single server does.
 */
export type BenchClient = Pick<
  Redis,
  | 'get'
  | 'del'
  | 'hmget'
  | 'hgetall'
  | 'hlen'
  | 'xrange'
  | 'time'
  | 'xinfo'
  | 'xlen'
  | 'zcard'
  | 'zrangebyscore'
  | 'smismember'
>;

export async function startRunRedis(
  options: { readonly redis?: string; readonly cluster?: number },
  log: (line: string) => void,
): Promise<RunRedis> {
  if (options.cluster !== undefined) return startCluster(options.cluster, log);
  if (options.redis) {
    return { nodes: [nodeOf(options.redis)], appEnv: { REDIS_URL: options.redis }, stop: async () => {} };
  }
  const redis = await startPrivateRedis({ appendonly: true });
  log(`private Redis at ${redis.url} (AOF everysec, removed afterwards)`);
  return { nodes: [nodeOf(redis.url)], appEnv: { REDIS_URL: redis.url }, stop: () => redis.remove() };
}

/**
 * `--cluster K`: a private Redis Cluster of K masters (harness/redis.ts, the launcher
 * `npm start -- --cluster K` uses), AOF on as for the standalone run's Redis, removed
 * afterwards. Each master is metered on its own.
 */
async function startCluster(masters: number, log: (line: string) => void): Promise<RunRedis> {
  const cluster = await startPrivateCluster({ masters, appendonly: true });
  const nodes = (await cluster.masters()).map((m) => nodeOf(m.url));
  log(`private Redis Cluster of ${masters} masters at ${cluster.clusterNodes} (AOF everysec, removed afterwards)`);
  return { nodes, appEnv: { REDIS_CLUSTER_NODES: cluster.clusterNodes }, stop: () => cluster.remove() };
}

/**
 * The bench's client for `redis`, and a connection per node to meter: for a cluster,
 * a Cluster client over its masters (it follows the slots) and one plain client per
 * master, since INFO is a node's own; standalone, one client for both.
 */
export function connect(redis: RunRedis): {
  client: BenchClient;
  meters: MeteredNode[];
  close(): Promise<void>;
} {
  const quit = (c: Redis | Cluster) =>
    c.quit().then(
      () => undefined,
      () => c.disconnect(),
    );
  if (redis.appEnv.REDIS_CLUSTER_NODES !== undefined) {
    // No periodic slot refresh: ioredis' timer can outlive quit() (see create-client.ts).
    const cluster = new Cluster(
      redis.nodes.map((n) => hostPort(n.url)),
      { slotsRefreshInterval: 0 },
    );
    const perNode = redis.nodes.map((n) => ({ name: n.name, client: new Redis(n.url) }));
    return {
      client: cluster,
      meters: perNode,
      close: async () => {
        await Promise.all([cluster, ...perNode.map((n) => n.client)].map(quit));
      },
    };
  }
  const client = new Redis(redis.nodes[0].url);
  return { client, meters: [{ name: redis.nodes[0].name, client }], close: () => quit(client) };
}

function hostPort(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port || 6379) };
}

function nodeOf(url: string): RedisNode {
  const { host, port } = hostPort(url);
  return { name: `${host}:${port}`, url };
}
