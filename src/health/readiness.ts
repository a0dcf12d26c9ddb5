import type { LockNodes } from '../locks/lock';
import type { RedisStatus } from './redis-status';

/** Slots of a Redis Cluster. */
const SLOTS = 16_384;

/** GET /health/ready's body, 200 (`ready`, `degraded`) and 503 (`unavailable`, `draining`) alike. */
export interface Readiness {
  readonly status: 'ready' | 'degraded' | 'unavailable' | 'draining';
  /** Why not `ready`, for a person; absent when ready. */
  readonly reason?: string;
  readonly redis?: RedisStatus['redis'];
  readonly problems?: readonly string[];
  readonly cluster?: RedisStatus['cluster'];
  /** Cluster, `degraded` or `unavailable`: the masters that cannot take a write now, and the slots no master that can serves. */
  readonly unserved?: { readonly masters: readonly string[]; readonly slots: number };
  readonly lockNodes?: LockNodes;
}

/** What readiness is judged from: /health's own look at Redis and at Redlock's nodes. */
export interface ReadinessInput {
  readonly redis: RedisStatus;
  /** Cluster mode: whether the app's cluster client is ready (it refuses every command until it is). */
  readonly clientReady: boolean;
  readonly lockNodes?: LockNodes;
}

/**
 * Whether this instance can take purchases now, for a load balancer: 200 `ready` or
 * `degraded`, 503 `unavailable` otherwise (draining is the controller's, it asks no one).
 *
 * One Redis: ready exactly when /health is ok. A problem /health lists either refuses
 * every write (`read-only`, `out-of-memory`, `persistence-failing`) or is what the app
 * refuses to start on (`eviction`: it may sell twice), so none is a partial state.
 *
 * A cluster: every instance sees the same cluster, so taking one out of service for a
 * master that is down helps nobody and stops the products of every other master too.
 * Ready (`degraded`) while the cluster says `cluster_state:ok` and at least one master
 * answers and would take a write: the products of those masters sell, the others' buyers
 * get 503 (REDIS_UNAVAILABLE, OUTCOME_UNKNOWN on a timeout), and the body says which
 * masters and how many slots. Unavailable when no node answers, the client is not ready,
 * no master could take a write, or the cluster's state is not ok: with the default
 * `cluster-require-full-coverage yes` a cluster that has noticed a slot without a
 * master refuses every command (CLUSTERDOWN) on every node, the healthy ones too.
 */
export function readiness({ redis, clientReady, lockNodes }: ReadinessInput): Readiness {
  const nodes = lockNodes ? { lockNodes } : {};
  if (lockNodes && lockNodes.up < lockNodes.quorum) {
    return {
      status: 'unavailable',
      reason: `${lockNodes.up} of ${lockNodes.total} Redlock nodes answer, fewer than the quorum of ${lockNodes.quorum}: no lock can be taken`,
      redis: redis.redis,
      ...nodes,
    };
  }
  const { cluster } = redis;
  if (!cluster) {
    const problems = redis.problems ?? [];
    if (redis.redis === 'up') return { status: 'ready', redis: 'up', ...nodes };
    return {
      status: 'unavailable',
      reason:
        problems.length > 0 ? `Redis would refuse or lose writes now: ${problems.join(', ')}` : 'Redis does not answer',
      redis: redis.redis,
      ...(problems.length > 0 ? { problems } : {}),
      ...nodes,
    };
  }
  const writable = cluster.masters.filter((m) => m.status === 'up' && m.problems.length === 0);
  const unserved = {
    masters: cluster.masters.filter((m) => !writable.includes(m)).map((m) => m.node),
    slots: SLOTS - writable.reduce((sum, m) => sum + m.slots, 0),
  };
  const said = { redis: redis.redis, cluster, unserved, ...nodes };
  let refused: string | null = null;
  if (cluster.masters.length === 0) refused = 'no node of the Redis Cluster answers';
  else if (!clientReady) refused = 'the cluster client is not ready (no slot map yet): it refuses every command';
  else if (cluster.state !== 'ok') {
    refused = `cluster_state is ${cluster.state}: every node refuses commands (CLUSTERDOWN) until the cluster serves every slot again`;
  } else if (writable.length === 0) refused = 'no master of the Redis Cluster answers and would take a write';
  if (refused) return { status: 'unavailable', reason: refused, ...said };
  if (redis.redis === 'up') return { status: 'ready', redis: 'up', cluster, ...nodes };
  return {
    status: 'degraded',
    reason:
      `${unserved.slots} of ${SLOTS} slots have no master that would take a write now` +
      (unserved.masters.length > 0 ? ` (${unserved.masters.join(', ')})` : '') +
      ': their products are refused, the rest sell',
    ...said,
  };
}
