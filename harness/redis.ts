import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { redisCommand, startCluster, startRedis, waitForClusterHealthy } from '../scripts/redis-server';
import { track } from './processes';

/** How the launchers start a Redlock node (AOF, appendfsync always): scripts/redis-server.js says why. */
export { REDLOCK_NODE } from '../scripts/redis-server';

export interface PrivateRedis {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** Its data folder (AOF files). */
  readonly dir: string;
  /** SIGTERM (Redis flushes its AOF) and wait for the exit; the folder stays, for a restart on it. */
  stop(): Promise<void>;
  /** SIGKILL without waiting: a Redis that vanishes. */
  kill(): void;
  /** Resolves once the process has exited (after kill(), before a restart on its port). */
  readonly exited: Promise<void>;
  /** stop(), and remove the folder if this module made it. */
  remove(): Promise<void>;
}

export interface PrivateRedisOptions {
  /** AOF (default false: tests and sales that need no restart). */
  readonly appendonly?: boolean;
  /** When the AOF reaches the disk (default everysec; REDLOCK_NODE says always). */
  readonly appendfsync?: 'everysec' | 'always';
  /** Restart on a port and data folder used before. */
  readonly port?: number;
  readonly dir?: string;
}

/**
 * A real redis-server on a free loopback port, with a data folder of its own: never
 * the host's 6379, never a mock. It is tracked, so stopAll() stops it too.
 */
export async function startPrivateRedis(options: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  const owned = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'seckill-redis-'));
  const server = await startRedis({
    dir,
    appendonly: options.appendonly ?? false,
    ...(options.appendfsync ? { appendfsync: options.appendfsync } : {}),
    ...(options.port ? { port: options.port } : {}),
  });
  const redis: PrivateRedis = {
    url: server.url,
    port: server.port,
    pid: server.pid,
    dir,
    stop: () => server.stop(),
    kill: () => server.kill(),
    exited: server.exited,
    remove: async () => {
      running.delete();
      await server.stop();
      if (owned) rmSync(dir, { recursive: true, force: true });
    },
  };
  const running = track({ stop: () => redis.remove() });
  return redis;
}

/** One redis-server of a PrivateCluster. */
export interface ClusterNode {
  readonly port: number;
  readonly url: string;
  readonly pid: number;
  /** What it was once the cluster was first healthy; a failover changes it (masters() says what is now). */
  readonly role: 'master' | 'replica';
  /** Its data folder (nodes.conf, AOF). */
  readonly dir: string;
  /** SIGKILL without waiting: a node that vanishes (its replica is promoted after the node timeout). */
  kill(): void;
  /** SIGTERM and wait for the exit. */
  stop(): Promise<void>;
  /** Resolves once the process has exited. */
  readonly exited: Promise<void>;
  /** SIGSTOP: the node holds its connections but answers nothing, like a node cut off. */
  pause(): void;
  /** SIGCONT after pause(). */
  resume(): void;
}

export interface PrivateCluster {
  readonly nodes: readonly ClusterNode[];
  /** The masters' `127.0.0.1:port`s at start, comma-separated: the app's REDIS_CLUSTER_NODES. */
  readonly clusterNodes: string;
  /** One folder per node below it, and ports.json. */
  readonly dir: string;
  /** False when it was started again from its folder (options.dir), with no new create. */
  readonly created: boolean;
  /** The node serving `slot` now, as a live node's CLUSTER NODES says. */
  masterOfSlot(slot: number): Promise<ClusterNode>;
  /** The masters now (a failed one left out), as a live node's CLUSTER NODES says. */
  masters(): Promise<ClusterNode[]>;
  /** Resolves once every live node (not exited, not paused) says cluster_state:`state`. */
  waitForState(state: 'ok' | 'fail', options?: { timeoutMs?: number }): Promise<void>;
  /** Resolves once every live node says cluster_state:ok, every slot served, its replicas linked. */
  waitUntilHealthy(options?: { timeoutMs?: number }): Promise<void>;
  /** SIGTERM every node and wait; the folder stays, for a restart on it (options.dir). */
  stop(): Promise<void>;
  /** stop(), and remove the folder if this module made it. */
  remove(): Promise<void>;
}

export interface PrivateClusterOptions {
  /** 3 or more (default 3). */
  readonly masters?: number;
  /** Replicas per master (default 0). */
  readonly replicas?: number;
  /** AOF on every node (default false: tests that need no restart). */
  readonly appendonly?: boolean;
  /** cluster-node-timeout (default 2000 ms, scripts/redis-server.js): about how long a failover takes. */
  readonly nodeTimeoutMs?: number;
  /** Restart the cluster a PrivateCluster made in this folder (its ports.json), with its data. */
  readonly dir?: string;
}

/**
 * A real Redis Cluster of redis-server processes on free loopback ports, each with a
 * data folder of its own, made by `redis-cli --cluster create` as `npm start --
 * --cluster N` makes one (scripts/redis-server.js startCluster). It is tracked, so
 * stopAll() stops it too. Its own queries use short connections that are closed
 * before each call returns.
 */
export async function startPrivateCluster(options: PrivateClusterOptions = {}): Promise<PrivateCluster> {
  const owned = options.dir === undefined;
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'seckill-cluster-'));
  const started = await startCluster({
    dir,
    appendonly: options.appendonly ?? false,
    ...(options.masters !== undefined ? { masters: options.masters } : {}),
    ...(options.replicas !== undefined ? { replicas: options.replicas } : {}),
    ...(options.nodeTimeoutMs !== undefined ? { nodeTimeoutMs: options.nodeTimeoutMs } : {}),
  }).catch((err: unknown) => {
    if (owned) rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  /** The ports of nodes neither exited nor paused: the ones that can answer. */
  const live = new Set<number>(started.nodes.map((n) => n.port));
  const nodes: ClusterNode[] = started.nodes.map((server) => {
    let gone = false;
    void server.exited.then(() => {
      gone = true;
      live.delete(server.port);
    });
    const signal = (name: NodeJS.Signals) => {
      try {
        process.kill(server.pid, name);
      } catch {
        // already gone
      }
    };
    return {
      port: server.port,
      url: server.url,
      pid: server.pid,
      role: server.role,
      dir: server.dir,
      kill: () => server.kill(),
      exited: server.exited,
      stop: async () => {
        signal('SIGCONT'); // a paused node cannot act on SIGTERM
        await server.stop();
      },
      pause: () => {
        live.delete(server.port);
        signal('SIGSTOP');
      },
      resume: () => {
        signal('SIGCONT');
        if (!gone) live.add(server.port);
      },
    };
  });
  const byPort = (port: number) => {
    const node = nodes.find((n) => n.port === port);
    if (!node) throw new Error(`the cluster names a node on port ${port} that is not one of its own`);
    return node;
  };
  /** CLUSTER NODES from the first live node that answers (one just killed may not have been reaped yet). */
  const clusterView = async () => {
    const errors: string[] = [];
    for (const port of live) {
      try {
        return parseClusterNodes(String(await redisCommand(port, ['CLUSTER', 'NODES'])));
      } catch (err) {
        errors.push(String(err));
      }
    }
    throw new Error(`no node of the cluster answered CLUSTER NODES: ${errors.join('; ') || 'all exited or paused'}`);
  };
  const stop = async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  };
  const cluster: PrivateCluster = {
    nodes,
    clusterNodes: started.clusterNodes,
    dir,
    created: started.created,
    masterOfSlot: async (slot) => {
      const owner = (await clusterView()).find((n) => n.master && n.slots.some(([a, b]) => a <= slot && slot <= b));
      if (!owner) throw new Error(`no live master serves slot ${slot}`);
      return byPort(owner.port);
    },
    masters: async () => (await clusterView()).filter((n) => n.master).map((n) => byPort(n.port)),
    waitForState: (state, { timeoutMs = 30_000 } = {}) =>
      pollUntil(`every live node says cluster_state:${state}`, timeoutMs, async () => {
        const said = await Promise.all(
          [...live].map((port) =>
            redisCommand(port, ['CLUSTER', 'INFO']).then(
              (info) => new RegExp(`^cluster_state:${state}\\r?$`, 'm').test(String(info)),
              () => false,
            ),
          ),
        );
        return said.every(Boolean);
      }),
    waitUntilHealthy: ({ timeoutMs = 30_000 } = {}) => waitForClusterHealthy([...live], { timeoutMs }),
    stop,
    remove: async () => {
      running.delete();
      await stop();
      if (owned) rmSync(dir, { recursive: true, force: true });
    },
  };
  const running = track({ stop: () => cluster.remove() });
  return cluster;
}

interface ClusterNodesLine {
  readonly port: number;
  /** A master not taken for failed. */
  readonly master: boolean;
  /** Slot ranges it serves, inclusive. */
  readonly slots: readonly (readonly [number, number])[];
}

/** CLUSTER NODES: `<id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot>...` a line. */
function parseClusterNodes(text: string): ClusterNodesLine[] {
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [, address, flags, , , , , , ...slots] = line.split(' ');
      const flagList = flags.split(',');
      return {
        port: Number(address.split('@')[0].split(':').pop()),
        master: flagList.includes('master') && !flagList.includes('fail'),
        // "[slot->-id]" / "[slot-<-id]" are slots being migrated, not served.
        slots: slots
          .filter((s) => !s.startsWith('['))
          .map((s) => {
            const [a, b = a] = s.split('-').map(Number);
            return [a, b] as const;
          }),
      };
    });
}

/** Polls `check` every 50 ms until it says true; throws naming `what` after `timeoutMs`. */
async function pollUntil(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() >= deadline) throw new Error(`not true within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
