/**
 * What one measured pass cost: the app's CPU per request, read from its processes' own
 * CPU time, and Redis's CPU and commands per request and per sale, read from INFO of
 * every Redis node the run uses (one standalone server, or each master of a cluster),
 * in total and per node. A Redis shard runs a product's commands on one thread, so
 * Redis CPU per sale is what finally limits how fast one product can sell on one
 * shard: 1 s / (CPU per sale); the per-node split shows whether many products spread.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

export interface Cost {
  /** CPU time (user + sys) of the app's processes over the pass, per request; null without /proc (not Linux). */
  readonly appCpuUsPerRequest: number | null;
  /** Redis's main-thread CPU time (used_cpu_*_main_thread) over the pass, per request. */
  readonly redisCpuUsPerRequest: number;
  /** The same per unit sold (sold-out answers' work included); null when the pass sold nothing. */
  readonly redisCpuUsPerSale: number | null;
  /** Commands Redis ran per unit sold: each command a script runs counts, as commandstats counts it. */
  readonly redisCommandsPerSale: number | null;
  /** 1e6 / redisCpuUsPerSale: sales per second at which this product would fill one Redis thread. */
  readonly salesPerSecCeiling: number | null;
  /** Each node's part, in the order given to startMeter (a standalone Redis: one, with all of it). */
  readonly shards: ShardCost[];
  /** The deltas the figures come from, summed over the nodes. */
  readonly measured: {
    readonly requests: number;
    readonly sold: number;
    readonly appCpuMs: number | null;
    readonly redisCpuMs: number;
    /** Calls per command over the pass (INFO commandstats), the bench's own INFO left out. */
    readonly redisCommands: Readonly<Record<string, number>>;
  };
}

/** One Redis node's part of a pass. */
export interface ShardCost {
  /** host:port. */
  readonly node: string;
  /** Its main-thread CPU time over the pass. */
  readonly cpuUs: number;
  /** cpuUs per unit sold in the whole pass: the nodes' figures add up to redisCpuUsPerSale. Null when nothing sold. */
  readonly cpuUsPerSale: number | null;
  /** Commands it ran (its commandstats delta, the bench's INFO left out). */
  readonly commands: number;
  /** commands per unit sold in the whole pass, as cpuUsPerSale. */
  readonly commandsPerSale: number | null;
  /** Its fraction of the pass's Redis CPU, 0 to 1 (1 for a standalone Redis). */
  readonly share: number;
}

/** A Redis node to meter: its name, and a connection to that node alone (INFO is per node). */
export interface MeteredNode {
  readonly name: string;
  readonly client: Pick<Redis, 'info'>;
}

interface RedisSample {
  readonly cpuUs: number;
  readonly calls: Record<string, number>;
}

/** One node's samples at both ends of a pass. */
export interface NodeSamples {
  readonly node: string;
  readonly before: RedisSample;
  readonly after: RedisSample;
}

/**
 * Starts measuring now: `stop` takes the second sample and divides. `pid` is the app's
 * process (a node:cluster primary: its workers, forked children, are counted with it).
 * `sold` is read by the caller (units sold in the pass), after stop() has sampled.
 */
export async function startMeter(
  nodes: readonly MeteredNode[],
  pid: number,
): Promise<{ stop(requests: number, sold: () => Promise<number>): Promise<Cost> }> {
  // The workers exist once the app is healthy; read the same processes at both ends.
  const pids = [pid, ...childrenOf(pid)];
  const appBefore = cpuTicks(pids);
  const sampleAll = () => Promise.all(nodes.map((n) => sampleRedis(n.client)));
  const redisBefore = await sampleAll();
  return {
    stop: async (requests, sold) => {
      const redisAfter = await sampleAll();
      const appAfter = cpuTicks(pids);
      return costOf(
        requests,
        await sold(),
        appBefore === null || appAfter === null ? null : ((appAfter - appBefore) * 1000) / clockTicksPerSecond(),
        nodes.map((n, i) => ({ node: n.name, before: redisBefore[i], after: redisAfter[i] })),
      );
    },
  };
}

export function costOf(requests: number, sold: number, appCpuMs: number | null, samples: readonly NodeSamples[]): Cost {
  const perRequest = (x: number) => x / Math.max(requests, 1);
  const perSale = (x: number) => (sold > 0 ? x / sold : null);
  const nodes = samples.map(({ node, before, after }) => {
    const commands: Record<string, number> = {};
    for (const [command, calls] of Object.entries(after.calls)) {
      const delta = calls - (before.calls[command] ?? 0);
      if (delta > 0) commands[command] = delta;
    }
    return { node, cpuUs: after.cpuUs - before.cpuUs, commands };
  });
  const redisCpuUs = nodes.reduce((sum, n) => sum + n.cpuUs, 0);
  const redisCommands: Record<string, number> = {};
  for (const n of nodes) {
    for (const [command, calls] of Object.entries(n.commands))
      redisCommands[command] = (redisCommands[command] ?? 0) + calls;
  }
  const count = (calls: Record<string, number>) => Object.values(calls).reduce((a, b) => a + b, 0);
  const commands = count(redisCommands);
  const cpuPerSale = perSale(redisCpuUs);
  const shards = nodes.map((n): ShardCost => {
    const cpu = perSale(n.cpuUs);
    const calls = count(n.commands);
    return {
      node: n.node,
      cpuUs: n.cpuUs,
      cpuUsPerSale: cpu === null ? null : round(cpu, 1),
      commands: calls,
      commandsPerSale: sold > 0 ? round(calls / sold, 2) : null,
      // One node has all of it, even when Redis was idle; else its part of the whole (0 if none was measured).
      share: nodes.length === 1 ? 1 : round(n.cpuUs / Math.max(redisCpuUs, 1), 3),
    };
  });
  return {
    appCpuUsPerRequest: appCpuMs === null ? null : round(perRequest(appCpuMs * 1000), 1),
    redisCpuUsPerRequest: round(perRequest(redisCpuUs), 2),
    redisCpuUsPerSale: cpuPerSale === null ? null : round(cpuPerSale, 1),
    redisCommandsPerSale: sold > 0 ? round(commands / sold, 2) : null,
    salesPerSecCeiling: cpuPerSale ? Math.round(1e6 / cpuPerSale) : null,
    shards,
    measured: { requests, sold, appCpuMs, redisCpuMs: round(redisCpuUs / 1000, 1), redisCommands },
  };
}

/**
 * INFO cpu and commandstats. The bench's own INFO calls are left out of the counts
 * (the progress line's GET, one every 5 s or 4 a second on a terminal, stays in: a
 * handful against thousands); their CPU, tens of µs each, is within the noise.
 */
export async function sampleRedis(redis: Pick<Redis, 'info'>): Promise<RedisSample> {
  const [cpu, stats] = await Promise.all([redis.info('cpu'), redis.info('commandstats')]);
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? NaN);
  const calls: Record<string, number> = {};
  for (const [, command, n] of stats.matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm)) {
    if (command !== 'info') calls[command] = Number(n);
  }
  // getrusage of the main thread, the one a shard's commands run on (Redis 6.2+), in
  // seconds with µs digits; of the whole server (with its fsync and I/O threads) on an
  // older Redis.
  const mainThread = field('used_cpu_user_main_thread') + field('used_cpu_sys_main_thread');
  const seconds = Number.isFinite(mainThread) ? mainThread : field('used_cpu_user') + field('used_cpu_sys');
  return { cpuUs: Math.round(seconds * 1e6), calls };
}

/** utime + stime of the processes in clock ticks (/proc/<pid>/stat), summed; null without /proc. */
function cpuTicks(pids: number[]): number | null {
  let ticks = 0;
  for (const pid of pids) {
    const stat = readStat(pid);
    if (!stat) return null;
    ticks += Number(stat[11]) + Number(stat[12]);
  }
  return ticks;
}

/** The fields of /proc/<pid>/stat after the command name (which may hold spaces): [0] is the state. */
function readStat(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** Processes whose parent is `pid` (field 4 of stat, [1] here). */
export function childrenOf(pid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    return [];
  }
  return entries.map(Number).filter((p) => Number(readStat(p)?.[1]) === pid);
}

let ticksPerSecond: number | undefined;
/** USER_HZ: 100 on Linux, asked once. */
function clockTicksPerSecond(): number {
  ticksPerSecond ??= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;
  return ticksPerSecond;
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
