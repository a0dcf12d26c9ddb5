import { Redis } from 'ioredis';
import { PrivatePostgres, startPrivatePostgres } from '../../harness/postgres';
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

/** A real Redis and PostgreSQL for every test of a file (useRedisAndPostgres). */
export interface RedisAndPostgres {
  readonly redis: TestRedis;
  readonly pg: PrivatePostgres;
  /** For reading the verdict from Redis itself. */
  readonly client: Redis;
  /** A fresh database of its own, on the file's PostgreSQL. */
  database(): Promise<string>;
  /** `app`, closed after the test that started it. */
  opened(app: TestApp): TestApp;
}

/**
 * Registers the hooks of a file whose tests share one Redis and one PostgreSQL: both
 * started before the first test and stopped after the last, each test's apps closed
 * after it. `name`: the stem of its databases' names.
 */
export function useRedisAndPostgres(name: string): RedisAndPostgres {
  let redis: TestRedis | undefined;
  let pg: PrivatePostgres | undefined;
  let client: Redis | undefined;
  let databases = 0;
  const open: TestApp[] = [];
  beforeAll(async () => {
    [redis, pg] = await Promise.all([startTestRedis(), startPrivatePostgres()]);
    client = new Redis(redis.url);
  }, 60_000);
  afterEach(async () => {
    await Promise.all(open.splice(0).map((a) => a.close()));
  });
  afterAll(async () => {
    if (client) await closeClient(client);
    await Promise.all([redis?.stop(), pg?.remove()]);
  });
  return {
    get redis() {
      return redis!;
    },
    get pg() {
      return pg!;
    },
    get client() {
      return client!;
    },
    database: () => pg!.createDatabase(`${name}_${process.pid}_${++databases}`),
    opened: (app) => {
      open.push(app);
      return app;
    },
  };
}
