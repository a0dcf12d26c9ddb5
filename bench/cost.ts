/**
 * What one measured pass cost: the app's CPU per request, read from its processes' own
 * CPU time, and Redis's CPU and commands per request and per sale, read from INFO.
 * A Redis shard runs a product's commands on one thread, so Redis CPU per sale is what
 * finally limits how fast one product can sell on one shard: 1 s / (CPU per sale).
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
  /** The deltas the figures come from. */
  readonly measured: {
    readonly requests: number;
    readonly sold: number;
    readonly appCpuMs: number | null;
    readonly redisCpuMs: number;
    /** Calls per command over the pass (INFO commandstats), the bench's own INFO left out. */
    readonly redisCommands: Readonly<Record<string, number>>;
  };
}

interface RedisSample {
  readonly cpuUs: number;
  readonly calls: Record<string, number>;
}

/**
 * Starts measuring now: `stop` takes the second sample and divides. `pid` is the app's
 * process (a node:cluster primary: its workers, forked children, are counted with it).
 * `sold` is read by the caller (units sold in the pass), after stop() has sampled.
 */
export async function startMeter(
  redis: Redis,
  pid: number,
): Promise<{ stop(requests: number, sold: () => Promise<number>): Promise<Cost> }> {
  // The workers exist once the app is healthy; read the same processes at both ends.
  const pids = [pid, ...childrenOf(pid)];
  const appBefore = cpuTicks(pids);
  const redisBefore = await sampleRedis(redis);
  return {
    stop: async (requests, sold) => {
      const redisAfter = await sampleRedis(redis);
      const appAfter = cpuTicks(pids);
      return costOf(
        requests,
        await sold(),
        appBefore === null || appAfter === null ? null : ((appAfter - appBefore) * 1000) / clockTicksPerSecond(),
        redisBefore,
        redisAfter,
      );
    },
  };
}

export function costOf(
  requests: number,
  sold: number,
  appCpuMs: number | null,
  before: RedisSample,
  after: RedisSample,
): Cost {
  const redisCpuUs = after.cpuUs - before.cpuUs;
  const redisCommands: Record<string, number> = {};
  for (const [command, calls] of Object.entries(after.calls)) {
    const delta = calls - (before.calls[command] ?? 0);
    if (delta > 0) redisCommands[command] = delta;
  }
  const commands = Object.values(redisCommands).reduce((a, b) => a + b, 0);
  const perRequest = (x: number) => x / Math.max(requests, 1);
  const perSale = (x: number) => (sold > 0 ? x / sold : null);
  const cpuPerSale = perSale(redisCpuUs);
  return {
    appCpuUsPerRequest: appCpuMs === null ? null : round(perRequest(appCpuMs * 1000), 1),
    redisCpuUsPerRequest: round(perRequest(redisCpuUs), 2),
    redisCpuUsPerSale: cpuPerSale === null ? null : round(cpuPerSale, 1),
    redisCommandsPerSale: sold > 0 ? round(commands / sold, 2) : null,
    salesPerSecCeiling: cpuPerSale ? Math.round(1e6 / cpuPerSale) : null,
    measured: { requests, sold, appCpuMs, redisCpuMs: round(redisCpuUs / 1000, 1), redisCommands },
  };
}

/**
 * INFO cpu and commandstats. The bench's own INFO calls are left out of the counts
 * (the progress line's GET, one every 5 s or 4 a second on a terminal, stays in: a
 * handful against thousands); their CPU, tens of µs each, is within the noise.
 */
export async function sampleRedis(redis: Redis): Promise<RedisSample> {
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
