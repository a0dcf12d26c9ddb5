import { Cluster } from 'ioredis';
import type { RedisClient } from '../redis/create-client';
import { FITNESS_SECTIONS, infoFields, writeProblems } from '../redis/redis-fitness';

/** One master of a Redis Cluster, as /health reports it. */
export interface MasterStatus {
  readonly node: string;
  readonly status: 'up' | 'down';
  /** Slots it serves. */
  readonly slots: number;
  /** Its replicas that the cluster does not see as failed. */
  readonly replicas: number;
  /** What makes it refuse or lose writes now (redis-fitness.ts writeProblems); empty when none. */
  readonly problems: readonly string[];
}

export interface ClusterStatus {
  /** cluster_state from CLUSTER INFO: `ok` only while every slot is served. */
  readonly state: string;
  /** Slots some master serves, of 16384. */
  readonly slotsCovered: number;
  readonly masters: readonly MasterStatus[];
}

export interface RedisStatus {
  /**
   * up: answers and would take a write; refusing: answers, but would refuse or lose a
   * write now (`problems` say why, on the node or the masters); down: does not answer
   * (a cluster: a master, the slot map or the cluster's state is missing).
   */
  readonly redis: 'up' | 'refusing' | 'down';
  /** Standalone: what makes it refuse or lose writes now (writeProblems); empty when none. */
  readonly problems?: readonly string[];
  /** Cluster mode only. */
  readonly cluster?: ClusterStatus;
}

const SLOTS = 16_384;
/** How long /health waits for one node: a node slower than this counts as down. */
const NODE_ANSWER_MS = 1_000;

function within<T>(reply: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${NODE_ANSWER_MS} ms`)), NODE_ANSWER_MS);
  });
  return Promise.race([reply, late]).finally(() => clearTimeout(timer));
}

/**
 * Standalone: whether Redis answers (one INFO) and would take a write. Cluster: the cluster's own view (CLUSTER
 * SHARDS and CLUSTER INFO from any node) plus a PING to every master, so a master
 * that is down shows before the cluster has failed it over; `up` only when the state
 * is ok, every slot is served and every master answers.
 */
export async function redisStatus(client: RedisClient, allowEviction = false): Promise<RedisStatus> {
  if (!(client instanceof Cluster)) {
    try {
      const problems = await problemsOf(client, allowEviction);
      return { redis: problems.length === 0 ? 'up' : 'refusing', problems };
    } catch {
      return { redis: 'down', problems: [] };
    }
  }
  try {
    // Asked of every master at once, the first answer taken: one that hangs (paused,
    // cut off) neither delays /health nor hides which master it is.
    const [shards, info] = await Promise.any(
      client
        .nodes('master')
        .map((node) =>
          within(
            Promise.all([
              node.call('CLUSTER', 'SHARDS') as Promise<unknown[]>,
              node.call('CLUSTER', 'INFO') as Promise<string>,
            ]),
          ),
        ),
    );
    const state = /cluster_state:(\w+)/.exec(info)?.[1] ?? 'unknown';
    const masters = await Promise.all(shards.map((shard) => masterStatus(client, shard, allowEviction)));
    const serving = masters.filter((m): m is MasterStatus => m !== null);
    const slotsCovered = serving.reduce((sum, m) => sum + m.slots, 0);
    // The client's own readiness too: until it has the slot map and the cluster said
    // ok, it refuses every command ("Cluster isn't ready") though each node answers.
    const answering =
      client.status === 'ready' && state === 'ok' && slotsCovered === SLOTS && serving.every((m) => m.status === 'up');
    const refusing = serving.some((m) => m.problems.length > 0);
    return {
      redis: !answering ? 'down' : refusing ? 'refusing' : 'up',
      cluster: { state, slotsCovered, masters: serving },
    };
  } catch {
    return { redis: 'down', cluster: { state: 'unknown', slotsCovered: 0, masters: [] } };
  }
}

/** The master of one CLUSTER SHARDS entry and whether it answers; null for a shard that serves no slot. */
async function masterStatus(client: Cluster, shard: unknown, allowEviction: boolean): Promise<MasterStatus | null> {
  const { slots: ranges = [], nodes = [] } = pairs(shard) as { slots?: number[]; nodes?: unknown[] };
  let slots = 0;
  for (let i = 0; i + 1 < ranges.length; i += 2) slots += ranges[i + 1] - ranges[i] + 1;
  const members = nodes.map(pairs);
  const master = members.find((n) => n.role === 'master');
  if (!master || slots === 0) return null;
  // A TLS-only node (port 0) lists its tls-port and no port.
  const node = `${String(master.endpoint ?? master.ip)}:${String(master.port ?? master['tls-port'])}`;
  // Not `online` only: Redis 7.0 reports a replica whose replication offset is still 0
  // (no write since it synced) as `loading`.
  const replicas = members.filter((n) => n.role === 'replica' && n.health !== 'failed').length;
  const connection = client.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === node);
  let problems: string[] = [];
  let answers: 'up' | 'down' = 'down';
  if (master.health === 'online' && connection) {
    try {
      problems = await within(problemsOf(connection, allowEviction));
      answers = 'up';
    } catch {
      // No answer in time: down, whatever it would have said.
    }
  }
  return { node, status: answers, slots, replicas, problems };
}

/** What makes one node refuse or lose writes, from one INFO (which also proves it answers). */
async function problemsOf(node: { call(...args: string[]): Promise<unknown> }, allowEviction: boolean) {
  return writeProblems(infoFields(String(await node.call('INFO', ...FITNESS_SECTIONS))), allowEviction);
}

/** `[name, value, name, value, ...]` -> `{ name: value }`. */
function pairs(reply: unknown): Record<string, unknown> {
  const list = reply as unknown[];
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < list.length; i += 2) out[String(list[i])] = list[i + 1];
  return out;
}
