import { Cluster } from 'ioredis';
import type { RedisClient } from '../redis/create-client';

/** One master of a Redis Cluster, as /health reports it. */
export interface MasterStatus {
  readonly node: string;
  readonly status: 'up' | 'down';
  /** Slots it serves. */
  readonly slots: number;
  /** Its replicas that the cluster does not see as failed. */
  readonly replicas: number;
}

export interface ClusterStatus {
  /** cluster_state from CLUSTER INFO: `ok` only while every slot is served. */
  readonly state: string;
  /** Slots some master serves, of 16384. */
  readonly slotsCovered: number;
  readonly masters: readonly MasterStatus[];
}

export interface RedisStatus {
  readonly redis: 'up' | 'down';
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
 * Standalone: whether Redis answers PING. Cluster: the cluster's own view (CLUSTER
 * SHARDS and CLUSTER INFO from any node) plus a PING to every master, so a master
 * that is down shows before the cluster has failed it over; `up` only when the state
 * is ok, every slot is served and every master answers.
 */
export async function redisStatus(client: RedisClient): Promise<RedisStatus> {
  if (!(client instanceof Cluster)) {
    return { redis: await client.ping().then(up, down) };
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
    const masters = await Promise.all(shards.map((shard) => masterStatus(client, shard)));
    const serving = masters.filter((m): m is MasterStatus => m !== null);
    const slotsCovered = serving.reduce((sum, m) => sum + m.slots, 0);
    const ok = state === 'ok' && slotsCovered === SLOTS && serving.every((m) => m.status === 'up');
    return { redis: ok ? 'up' : 'down', cluster: { state, slotsCovered, masters: serving } };
  } catch {
    return { redis: 'down', cluster: { state: 'unknown', slotsCovered: 0, masters: [] } };
  }
}

/** The master of one CLUSTER SHARDS entry and whether it answers; null for a shard that serves no slot. */
async function masterStatus(client: Cluster, shard: unknown): Promise<MasterStatus | null> {
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
  const answers = master.health === 'online' && connection ? await within(connection.ping()).then(up, down) : 'down';
  return { node, status: answers, slots, replicas };
}

/** `[name, value, name, value, ...]` -> `{ name: value }`. */
function pairs(reply: unknown): Record<string, unknown> {
  const list = reply as unknown[];
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < list.length; i += 2) out[String(list[i])] = list[i + 1];
  return out;
}

const up = () => 'up' as const;
const down = () => 'down' as const;
