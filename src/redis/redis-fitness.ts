import { Cluster, Redis } from 'ioredis';
import type { RedisClient } from './create-client';

/**
 * Whether a Redis can hold a sale's promises, read from its INFO: the eviction policy
 * (at start-up, where anything but noeviction refuses to serve) and what makes it refuse
 * writes right now (for /health).
 *
 * Eviction is the one that breaks the promises silently. Under `volatile-*` the lock
 * (PX) and the Idempotency-Key outcomes (PEXPIRE) may be evicted: two holders at once,
 * a keyed retry that buys twice. Under `allkeys-*` the fencing counter and the buyers'
 * counts may go too: an old token passes the fence again, a per-user limit restarts at 0.
 * Only `noeviction` answers memory pressure with an error (OOM, REDIS_OUT_OF_MEMORY)
 * instead of a lost key.
 */

/** `name:value` lines of an INFO reply (any sections), as a map. */
export function infoFields(info: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of info.split(/\r?\n/)) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) fields.set(line.slice(0, at), line.slice(at + 1).trim());
  }
  return fields;
}

/** The one policy that never drops a key to make room. */
export const SAFE_EVICTION_POLICY = 'noeviction';

/** Why this node's eviction policy may lose the sale's keys, or null if it will not (or its INFO does not say). */
export function evictionProblem(fields: ReadonlyMap<string, string>, node: string): string | null {
  const policy = fields.get('maxmemory_policy');
  if (policy === undefined || policy === SAFE_EVICTION_POLICY) return null;
  return (
    `Redis ${node} has maxmemory-policy ${policy}: under memory pressure it may evict the lock, the fencing counter, ` +
    `buyers' counts or Idempotency-Key outcomes, and sell twice; set maxmemory-policy ${SAFE_EVICTION_POLICY} ` +
    `(CONFIG SET maxmemory-policy ${SAFE_EVICTION_POLICY}, and in its config file), or set REDIS_ALLOW_EVICTION=1 for a Redis that can never fill`
  );
}

/**
 * What makes this node refuse or lose writes now, each as a short word /health lists:
 * `eviction` (unless allowed), `read-only` (a replica, where a master is needed),
 * `out-of-memory` (maxmemory reached under noeviction: every write answers OOM),
 * `persistence-failing` (its last save or AOF write failed: writes answer MISCONF).
 */
export function writeProblems(fields: ReadonlyMap<string, string>, allowEviction: boolean): string[] {
  const problems: string[] = [];
  const policy = fields.get('maxmemory_policy');
  if (!allowEviction && policy !== undefined && policy !== SAFE_EVICTION_POLICY) problems.push('eviction');
  if (fields.has('role') && fields.get('role') !== 'master') problems.push('read-only');
  const max = Number(fields.get('maxmemory') ?? 0);
  if (max > 0 && policy === SAFE_EVICTION_POLICY && Number(fields.get('used_memory') ?? 0) >= max) {
    problems.push('out-of-memory');
  }
  if (fields.get('rdb_last_bgsave_status') === 'err' || fields.get('aof_last_write_status') === 'err') {
    problems.push('persistence-failing');
  }
  return problems;
}

/** The INFO sections the checks read. */
export const FITNESS_SECTIONS = ['memory', 'persistence', 'replication'] as const;

/** How long the start-up check waits for one node: one that does not answer is reported, not awaited. */
const NODE_ANSWER_MS = 2_000;

/** What the start-up check found: problems, and nodes it could not ask (each with why). */
export interface EvictionCheck {
  readonly problems: readonly string[];
  readonly unanswered: readonly string[];
}

/**
 * The eviction problems of every node a sale's keys may live on: the one Redis, or every
 * node of a cluster, replicas included (a replica is promoted in a failover). The
 * client knows only the nodes CLUSTER SLOTS lists, and Redis 7.0 leaves a replica out
 * of it until it has replicated a write (a freshly made cluster's replicas): the rest
 * are found in CLUSTER NODES and asked on a connection of their own. A node that does
 * not answer is reported apart: the others' problems stand.
 */
export async function checkEvictionPolicy(client: RedisClient): Promise<EvictionCheck> {
  const asked: { name: string; info: () => Promise<string> }[] = [];
  if (!(client instanceof Cluster)) {
    const name = `${client.options.host ?? '127.0.0.1'}:${client.options.port ?? 6379}`;
    asked.push({ name, info: () => client.info('memory') });
  } else {
    const known = new Map(client.nodes('all').map((n) => [`${n.options.host}:${n.options.port}`, n]));
    for (const [name, node] of known) asked.push({ name, info: () => node.info('memory') });
    const listed = await within(client.nodes('master')[0]?.call('CLUSTER', 'NODES') ?? Promise.resolve(''));
    for (const name of clusterNodeAddresses(String(listed))) {
      if (!known.has(name)) asked.push({ name, info: () => infoOfUnknownNode(client, name) });
    }
  }
  const answers = await Promise.allSettled(asked.map(({ info }) => within(info())));
  const problems: string[] = [];
  const unanswered: string[] = [];
  answers.forEach((answer, i) => {
    if (answer.status === 'rejected') {
      unanswered.push(`${asked[i].name} (${(answer.reason as Error).message})`);
      return;
    }
    const problem = evictionProblem(infoFields(answer.value), asked[i].name);
    if (problem) problems.push(problem);
  });
  return { problems, unanswered };
}

/** `host:port` of every node a CLUSTER NODES reply lists, but those it marks failed or without an address. */
export function clusterNodeAddresses(reply: string): string[] {
  return reply
    .split('\n')
    .map((line) => line.split(' '))
    .filter((fields) => fields.length >= 3 && !/\b(fail|noaddr)\b/.test(fields[2]))
    .map((fields) => fields[1].split('@')[0])
    .filter((address) => !address.startsWith(':'));
}

/** INFO memory of a node the cluster client has no connection to, on one of its own with the cluster's login and TLS. */
async function infoOfUnknownNode(client: Cluster, name: string): Promise<string> {
  const at = name.lastIndexOf(':');
  const node = new Redis({
    ...client.options.redisOptions,
    host: name.slice(0, at),
    port: Number(name.slice(at + 1)),
    lazyConnect: true,
    enableOfflineQueue: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  node.on('error', () => undefined);
  try {
    await node.connect();
    return await node.info('memory');
  } finally {
    node.disconnect();
  }
}

function within<T>(reply: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${NODE_ANSWER_MS} ms`)), NODE_ANSWER_MS);
  });
  return Promise.race([reply, late]).finally(() => clearTimeout(timer));
}
