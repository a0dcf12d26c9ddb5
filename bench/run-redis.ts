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
    const masters = await clusterMasters(options.redis);
    if (masters) {
      log(
        `--redis ${nodeOf(options.redis).name} is a node of a Redis Cluster: its masters ${masters.map((m) => nodeOf(m).name).join(', ')}`,
      );
      return { nodes: masters.map(nodeOf), appEnv: { REDIS_CLUSTER_NODES: masters.join(',') }, stop: async () => {} };
    }
    return { nodes: [nodeOf(options.redis)], appEnv: { REDIS_URL: options.redis }, stop: async () => {} };
  }
  const redis = await startPrivateRedis({ appendonly: true });
  log(`private Redis at ${redis.url} (AOF everysec, removed afterwards)`);
  return { nodes: [nodeOf(redis.url)], appEnv: { REDIS_URL: redis.url }, stop: () => redis.remove() };
}

/**
 * A Redis named by URL may be a node of a Redis Cluster (a deployment on one: --target):
 * then the run reads and meters every master, as for --cluster K, each reached with the
 * URL's scheme and login (a cluster's nodes share them). Null for a standalone server.
 */
async function clusterMasters(url: string): Promise<string[] | null> {
  const node = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await node.connect();
    if (!/^cluster_enabled:1\b/m.test(await node.info('cluster'))) return null;
    const lines = String(await node.call('CLUSTER', 'NODES'))
      .trim()
      .split('\n');
    const { protocol, username, password } = new URL(url);
    const login = username || password ? `${username}${password ? `:${password}` : ''}@` : '';
    // `<id> <ip:port@cport[,hostname]> <flags> ...`: the masters not marked failed.
    return lines
      .map((line) => line.split(' '))
      .filter(([, , flags]) => flags.split(',').includes('master') && !/fail/.test(flags))
      .map(([, address]) => `${protocol}//${login}${address.split('@')[0]}`);
  } finally {
    node.disconnect();
  }
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
    const { protocol, username, password } = new URL(redis.nodes[0].url);
    const cluster = new Cluster(
      redis.nodes.map((n) => hostPort(n.url)),
      {
        slotsRefreshInterval: 0,
        // A cluster named by --redis: its URL's login and TLS, for every node the client finds.
        redisOptions: {
          ...(username && { username: decodeURIComponent(username) }),
          ...(password && { password: decodeURIComponent(password) }),
          ...(protocol === 'rediss:' && { tls: {} }),
        },
      },
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
