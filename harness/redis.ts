import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedis } from '../scripts/redis-server';
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
