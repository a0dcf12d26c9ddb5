import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis as IORedis } from 'ioredis';
import type { Redis } from 'ioredis';
import { defineScripts } from '../../src/redis/redis-scripts';
import { startRedis } from '../../scripts/redis-server';

export interface TestRedis {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** SIGTERM and wait; the data folder is removed. */
  stop(): Promise<void>;
  /** SIGKILL without waiting: for tests of a Redis that vanishes. */
  kill(): void;
}

/**
 * A real redis-server on a free loopback port with its own temporary data folder.
 * Never the host's 6379, never a mock.
 */
export async function startTestRedis(options: { appendonly?: boolean } = {}): Promise<TestRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'seckill-redis-'));
  const redis = await startRedis({ dir, appendonly: options.appendonly ?? false });
  return {
    url: redis.url,
    port: redis.port,
    dir,
    kill: redis.kill,
    stop: async () => {
      await redis.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let prefixes = 0;
/** A key prefix no other test in this process uses, so tests never see each other's keys. */
export function uniquePrefix(name: string): string {
  return `t${process.pid}-${++prefixes}-${name}:`;
}

/** QUIT a test's client (disconnect() leaves a timer that keeps Jest alive). */
export async function closeClient(client: Redis | undefined): Promise<void> {
  if (!client || client.status === 'end') return;
  await client.quit().catch(() => client.disconnect());
}

/**
 * For a spec file: `closing(x)` returns x and closes it after the file's tests.
 * Lock strategies keep a subscriber connection of their own once they have waited
 * for a lock; left open, it keeps Jest from exiting.
 */
export function useClosing(): <T extends { close(): Promise<void> }>(item: T) => T {
  const items: { close(): Promise<void> }[] = [];
  afterAll(() => Promise.all(items.map((item) => item.close())));
  return (item) => {
    items.push(item);
    return item;
  };
}

/**
 * For a spec file: one real Redis started before its tests, and `client()` for a
 * fresh connection (scripts registered) per simulated process; everything is
 * closed and stopped after the file.
 */
export function useTestRedis(): { url(): string; client(): Redis } {
  let redis: TestRedis | undefined;
  const clients: Redis[] = [];
  beforeAll(async () => {
    redis = await startTestRedis();
  });
  afterAll(async () => {
    await Promise.all(clients.map(closeClient));
    await redis?.stop();
  });
  return {
    url: () => redis!.url,
    client: () => {
      const c = new IORedis(redis!.url);
      defineScripts(c);
      clients.push(c);
      return c;
    },
  };
}
