import { Cluster, type Redis } from 'ioredis';
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

/**
 * Every node a sale's keys may live on: the one Redis, or every node of a cluster,
 * replicas included (a replica is promoted in a failover), each with its address.
 */
export function nodesOf(client: RedisClient): { readonly name: string; readonly node: Redis }[] {
  if (!(client instanceof Cluster)) {
    return [{ name: `${client.options.host ?? '127.0.0.1'}:${client.options.port ?? 6379}`, node: client }];
  }
  return client.nodes('all').map((node) => ({ name: `${node.options.host}:${node.options.port}`, node }));
}

/** The eviction problems of every node (none when REDIS_ALLOW_EVICTION=1), at start-up. */
export async function checkEvictionPolicy(client: RedisClient): Promise<string[]> {
  const nodes = nodesOf(client);
  const problems = await Promise.all(
    nodes.map(async ({ name, node }) => evictionProblem(infoFields(await node.info('memory')), name)),
  );
  return problems.filter((p): p is string => p !== null);
}
