import { Redis } from 'ioredis';
import { KeyLayout } from '../../src/redis/key-layout';
import { startTestApp, TestApp } from './app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './redis';

/** A real Redis, the app on it under a fresh key prefix, and a client to inspect Redis directly. */
export interface TestStack {
  readonly redis: TestRedis;
  readonly app: TestApp;
  readonly url: string;
  /** For reading the verdict from Redis itself, not from the app's answers. */
  readonly client: Redis;
  readonly keys: KeyLayout;
  close(): Promise<void>;
}

export async function startTestStack(name: string, env: Record<string, string> = {}): Promise<TestStack> {
  const redis = await startTestRedis();
  const prefix = uniquePrefix(name);
  const app = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: prefix, ...env });
  const client = new Redis(redis.url);
  return {
    redis,
    app,
    url: app.url,
    client,
    keys: new KeyLayout(prefix),
    close: async () => {
      await app.close();
      await closeClient(client);
      await redis.stop();
    },
  };
}
