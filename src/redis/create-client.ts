import { Logger } from '@nestjs/common';
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import type { RedisClusterConfig } from './cluster-nodes';
import type { RedisConfig } from './redis.config';
import { keepNodesAnswering } from './node-pool';
import { resendingNotRun } from './unrun-retry';

/**
 * What the app talks to: one Redis (REDIS_URL) or a Redis Cluster
 * (REDIS_CLUSTER_NODES). Both speak the same commands; every key of a product shares
 * the hash tag `{p:<id>}`, so each script and MULTI of a product runs on one node.
 */
export type RedisClient = Redis | Cluster;

/**
 * Upper bound on one command's round trip. A purchase must end in a definite answer,
 * so a command stuck on a dead socket fails (503 REDIS_UNAVAILABLE) instead of waiting
 * for a reconnect that may never come.
 */
export const COMMAND_TIMEOUT_MS = 2_000;

/** How every connection to a Redis node is made, standalone or in a cluster. */
const CONNECTION_OPTIONS = {
  // No offline queue and one retry per request: while Redis is away, buyers
  // get an immediate 503 instead of piling up behind a reconnect.
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  // Never send a command twice. ioredis would resend every command that had no
  // reply when a connection dropped, writes included: a purchase whose EXEC was
  // applied but whose reply was lost would run again and sell twice. A write with
  // no reply is an unknown outcome (OUTCOME_UNKNOWN), for the caller to resolve.
  autoResendUnfulfilledCommands: false,
  commandTimeout: COMMAND_TIMEOUT_MS,
  connectionName: 'seckill',
  // Reconnect after 50, 100, 150 ... ms, at most 2 s apart (ioredis 5's rule). ioredis 6
  // doubles the wait up to 5 s, plus up to 200 ms of jitter: after an outage of a few
  // seconds the app stayed away from a Redis that was back for seconds more, answering
  // 503 while it could sell (seen as "nothing was sold after the restart" in the faults).
  retryStrategy: (times: number) => Math.min(times * 50, 2_000),
  // RESP2, as ioredis 5 spoke it (ioredis 6 says HELLO 3 by default). The app uses
  // nothing RESP3 adds (client-side caching, pushes beside replies), and the fault
  // suite's TCP nemesis counts replies on the wire as RESP2 to know which command a
  // fault cut: one wire protocol, the one the faults are proven on.
  protocol: 2,
  // No CLIENT SETINFO on connect: Redis 7.0 does not know it, and from 7.2 a
  // least-privilege user (docs/deployment.md) may not run it; each connection would
  // leave a refusal in ACL LOG.
  disableClientInfo: true,
  // On shutdown a socket that will not close cleanly is destroyed after this.
  disconnectTimeout: 500,
} as const satisfies RedisOptions;

/** The app's client: the cluster when REDIS_CLUSTER_NODES is set, else REDIS_URL's Redis. */
export function createAppRedisClient(config: Pick<RedisConfig, 'redisUrl' | 'redisCluster'>): RedisClient {
  if (config.redisCluster) return createRedisCluster(config.redisCluster, 'Redis');
  return createRedisClient(config.redisUrl!, 'Redis');
}

/**
 * An ioredis client as the app uses them all (the main one, Redlock's nodes): fail
 * fast while Redis is away, log each outage once.
 */
export function createRedisClient(
  url: string,
  name: string,
  options: { commandTimeout?: number; enableAutoPipelining?: boolean } = {},
): Redis {
  const client = new Redis(url, {
    ...CONNECTION_OPTIONS,
    // Commands issued in the same event-loop tick leave in one socket write: under a
    // burst, thousands of buyers' reads cost a handful of syscalls, not one each.
    enableAutoPipelining: true,
    ...options,
  });
  reportOutages(client, name, () => redactUrl(url));
  return client;
}

/**
 * ioredis' Cluster client over `cluster`'s seed nodes, with the standalone client's
 * rules on every node connection. What the cluster adds, and what it must not do:
 * - A MOVED, ASK, TRYAGAIN or CLUSTERDOWN reply means the node did not run the
 *   command, so sending it again (to the slot's new owner, after ASKING, or after a
 *   pause) is safe, and is how a slot migration stays invisible to buyers: ioredis
 *   does it for a command sent alone, a bounded number of times, and
 *   resendingNotRun (unrun-retry.ts) for what ioredis hands back unrun.
 * - A connection that closes under a command is not: the node may have run it. ioredis
 *   would send it again to another node after `retryDelayOnFailover`; 0 turns that off,
 *   and the caller sees the same unknown outcome it sees standalone.
 */
export function createRedisCluster(cluster: RedisClusterConfig, name: string): Cluster {
  const client = new Cluster(
    cluster.nodes.map((n) => ({ host: n.host, port: n.port })),
    clusterOptions(cluster),
  );
  reportOutages(client, name, () => `the cluster at ${cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',')}`);
  refreshSlotsEvery(client);
  keepNodesAnswering(client);
  // ioredis opens a node's connection on its first command, and with no offline queue
  // rejects every other command for that node until it is up ("Connection is closed.",
  // which reads like a write cut mid-flight): connect each node as soon as it is known,
  // at start-up, after a failover, after a slot moved to a new node.
  client.on('+node', (node: Redis) => {
    if (node.status === 'wait') node.connect().catch(() => undefined);
  });
  // What ioredis hands back unrun (a redirection from an auto-pipelined batch, or one
  // it stopped following) is sent again: a slot move or a failover is not a buyer's 503.
  return resendingNotRun(client);
}

/** How often a cluster client relearns the slot map with no MOVED to tell it (a promoted replica, a moved slot). */
const SLOTS_REFRESH_MS = 1_000;

/**
 * Relearns `cluster`'s slot map every SLOTS_REFRESH_MS while it is open, on a timer that
 * stops when the client ends and never keeps a process alive by itself.
 */
export function refreshSlotsEvery(cluster: Cluster): void {
  const timer = setInterval(() => {
    if (cluster.status === 'ready') cluster.refreshSlotsCache();
  }, SLOTS_REFRESH_MS).unref();
  cluster.once('end', () => clearInterval(timer));
}

/**
 * Resolves true once `client` can serve every key: standalone, once it is ready; on a
 * cluster, once the slot map is known and every master's connection is up. False if
 * that takes longer than `waitMs`.
 */
export async function whenReady(client: RedisClient, waitMs: number): Promise<boolean> {
  const deadline = performance.now() + waitMs;
  if (!(await readyBy(client, deadline))) return false;
  if (!(client instanceof Cluster)) return true;
  const masters = client.nodes('master');
  return masters.length > 0 && (await Promise.all(masters.map((m) => readyBy(m, deadline)))).every(Boolean);
}

function readyBy(client: RedisClient, deadline: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      resolve(ok);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), Math.max(0, deadline - performance.now()));
    client.on('ready', onReady);
  });
}

function clusterOptions(cluster: RedisClusterConfig): ClusterOptions {
  return {
    enableOfflineQueue: false,
    // Off on a cluster: ioredis sends an auto-pipelined batch whose one command heard ASK
    // and whose others were reads again whole to the ASK target, where the keys that
    // have not moved yet read as nil (unrun-retry.spec.ts shows it): a wrong read, not an
    // error, while a slot moves. Alone, each command follows its own redirection.
    enableAutoPipelining: false,
    retryDelayOnFailover: 0,
    // A failover or a slot move answers CLUSTERDOWN or TRYAGAIN for a moment: try again
    // soon, a bounded number of times (maxRedirections), then the buyer gets a 503.
    retryDelayOnClusterDown: 100,
    retryDelayOnTryAgain: 50,
    maxRedirections: 16,
    // Off: ioredis' own timer re-arms itself after a refresh that was in flight during
    // quit(), and then keeps a closed client's process alive (refreshSlotsEvery instead).
    slotsRefreshInterval: 0,
    scaleReads: 'master',
    // With TLS, dial every node by the name it was given, not by an address: Node checks
    // the certificate against the host it dialled, and a certificate names the node's
    // host (DNS:...), seldom its IP. ioredis resolves seed host names to IPs unless told
    // not to (its README: "AWS ElastiCache Clusters with TLS"); the nodes it learns from
    // CLUSTER SLOTS are dialled as they announce themselves, so a TLS cluster's nodes
    // must announce the name on their certificate (cluster-announce-hostname with
    // cluster-preferred-endpoint-type hostname, Redis 7), as ElastiCache's do.
    ...(cluster.tls ? { dnsLookup: (address, callback) => callback(null, address) } : {}),
    redisOptions: {
      ...CONNECTION_OPTIONS,
      ...(cluster.username ? { username: cluster.username } : {}),
      ...(cluster.password ? { password: cluster.password } : {}),
      ...(cluster.tls ? { tls: {} } : {}),
    },
  };
}

/**
 * A second client to the same Redis or cluster with `options` on its connections:
 * for a cluster the options are merged into every node connection's (keeping the
 * login and TLS), which `Cluster#duplicate` alone would replace. Its outages are
 * logged under `name`: an 'error' event nobody listens to would crash the process
 * (a Cluster emits one when a master it subscribed on dies).
 */
export function duplicateClient(
  client: RedisClient,
  options: Partial<RedisOptions>,
  name: string,
  clusterOptions: Partial<ClusterOptions> = {},
): RedisClient {
  let copy: RedisClient;
  if (client instanceof Cluster) {
    const { enableOfflineQueue, enableAutoPipelining } = options;
    const cluster = client.duplicate(undefined, {
      ...(enableOfflineQueue !== undefined ? { enableOfflineQueue } : {}),
      ...(enableAutoPipelining !== undefined ? { enableAutoPipelining } : {}),
      ...clusterOptions,
      redisOptions: { ...client.options.redisOptions, ...options },
    });
    refreshSlotsEvery(cluster);
    keepNodesAnswering(cluster);
    copy = cluster;
  } else {
    copy = client.duplicate(options);
  }
  reportOutages(copy, name, () => 'Redis', { quiet: true });
  return copy;
}

/** QUIT a client that is connected (replies on the wire still arrive); just drop one that is not. */
export async function closeRedisClient(client: RedisClient): Promise<void> {
  if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
  else client.disconnect();
}

/**
 * ioredis emits one error per failed reconnect; say it once per outage. A Cluster also
 * reports each node's errors ('node error'), once per node until it is back. `quiet`:
 * a helper connection (a subscriber), whose reconnects are not news.
 */
function reportOutages(
  client: RedisClient,
  name: string,
  target: () => string,
  { quiet = false }: { quiet?: boolean } = {},
): void {
  const logger = new Logger(name);
  // Cluster only: why each failing node failed (its last error that says more than that
  // a connection closed), for the cluster's own error line.
  const reasons = new Map<string, string>();
  let outageReported = false;
  /** performance.now() of the outage's first error; 0 while connected. */
  let downSince = 0;
  client.on('ready', () => {
    const outage = downSince > 0 ? ` (unavailable for ${Math.round(performance.now() - downSince)} ms)` : '';
    outageReported = false;
    downSince = 0;
    reasons.clear();
    if (!quiet) logger.log(`connected to ${target()}${outage}`);
  });
  client.on('error', (err: Error) => {
    if (outageReported) return;
    outageReported = true;
    downSince = performance.now();
    const say = () => logger.warn(`unavailable: ${err.message}${nodeReasons(err, reasons)}`);
    // A Cluster's slot-map request fails first, saying only "Connection is closed."; the
    // nodes' own connections say why a moment later.
    if ('lastNodeError' in err && reasons.size === 0) setTimeout(say, REASON_WAIT_MS).unref();
    else say();
  });
  if (!(client instanceof Cluster)) return;
  if (!quiet) reportSlotMoves(client, logger);
  const down = new Set<string>();
  client.on('node error', (err: Error, node: string) => {
    // ioredis asks for the slot map on a connection of its own whose errors it drops, so
    // its failure reads "Connection is closed."; the node's own connection says why
    // (a certificate, a refused connection): keep that.
    if (err.message !== CONNECTION_CLOSED) reasons.set(node, err.message);
    if (quiet || down.has(node)) return;
    down.add(node);
    logger.warn(`node ${node} unavailable: ${err.message}`);
  });
  client.on('+node', (node: Redis) => {
    node.on('ready', () => {
      const key = `${node.options.host}:${node.options.port}`;
      reasons.delete(key);
      if (down.delete(key) && !quiet) logger.log(`node ${key} is back`);
    });
  });
}

/**
 * One line when a refresh of the slot map (every SLOTS_REFRESH_MS, or after a MOVED)
 * finds slots served by another master than at the refresh before: a slot migration
 * or a failover, seen from this app.
 */
function reportSlotMoves(cluster: Cluster, logger: Logger): void {
  let owners: (string | undefined)[] = [];
  cluster.on('refresh', () => {
    const now = Array.from({ length: SLOT_COUNT }, (_, slot) => cluster.slots[slot]?.[0]);
    if (owners.length > 0) {
      const moved = now.filter((owner, slot) => owner !== owners[slot]);
      if (moved.length > 0) {
        const to = [...new Set(moved)].map((owner) => owner ?? 'no master').join(', ');
        logger.log(
          `slot map changed: ${moved.length} slot${moved.length === 1 ? '' : 's'} changed owner (now on ${to})`,
        );
      }
    }
    owners = now;
  });
}

/** Hash slots of a Redis Cluster. */
const SLOT_COUNT = 16_384;

/** ioredis' message for a command on a connection that is not open. */
const CONNECTION_CLOSED = 'Connection is closed.';
/** How long a Cluster's outage line waits for a node to say why it failed. */
const REASON_WAIT_MS = 500;

/**
 * What a Cluster's "Failed to refresh slots cache." does not say: why its nodes failed.
 * ioredis attaches only the last node's error (`lastNodeError`), often just "Connection
 * is closed."; each node's own connection said more.
 */
function nodeReasons(err: Error, reasons: ReadonlyMap<string, string>): string {
  const last = (err as Error & { lastNodeError?: Error }).lastNodeError;
  if (!last) return '';
  if (reasons.size === 0) return ` (${last.message})`;
  return ` (${[...reasons].map(([node, reason]) => `${node}: ${reason}`).join('; ')})`;
}

function redactUrl(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//***@');
}
