import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { freePort } from '../scripts/redis-server';
import { request, startSale } from './helpers/app';
import { startTestStack, TestStack } from './helpers/stack';

/**
 * Redis refusing a command it did not run, for a reason of its own: each refusal is a
 * 503 with its own code and Retry-After (it was a 500 "a bug", or READONLY a
 * REDIS_UNAVAILABLE), nothing is written, and /health says what it can see of it
 * beforehand. Each is brought about for real on a real redis-server, then undone.
 */
describe('Redis refusals: their own 503 codes, nothing written, /health says so', () => {
  let stack: TestStack;
  let admin: Redis;
  let products = 0;

  beforeAll(async () => {
    stack = await startTestStack('refusals');
    admin = stack.client;
  });

  afterAll(() => stack?.close());

  /**
   * MISCONF: a save that fails, with save points configured (Redis then stops writes).
   * A folder where the snapshot should land makes its final rename fail (`dir` itself
   * is a protected setting); a save that succeeds again lifts it.
   */
  async function failingSave(): Promise<() => Promise<void>> {
    const [, file] = (await admin.config('GET', 'dbfilename')) as string[];
    const blocker = join(stack.redis.dir, file);
    mkdirSync(join(blocker, 'not-a-file'), { recursive: true });
    await admin.config('SET', 'save', '3600 1');
    const saved = async (status: string) => {
      await admin.bgsave();
      while (
        !new RegExp(`rdb_bgsave_in_progress:0[\\s\\S]*rdb_last_bgsave_status:${status}`).test(
          await admin.info('persistence'),
        )
      ) {
        await sleep(20);
      }
    };
    await saved('err');
    return async () => {
      rmSync(blocker, { recursive: true, force: true });
      await saved('ok');
      await admin.config('SET', 'save', '');
    };
  }

  /** READONLY: the Redis becomes a replica (of a master that is not there). */
  async function demoted(): Promise<() => Promise<void>> {
    await admin.call('REPLICAOF', '127.0.0.1', String(await freePort()));
    return async () => void (await admin.call('REPLICAOF', 'NO', 'ONE'));
  }

  const cases: [reply: string, code: string, problem: string | null, cause: () => Promise<() => Promise<void>>][] = [
    [
      'OOM',
      'REDIS_OUT_OF_MEMORY',
      'out-of-memory',
      async () => {
        await admin.config('SET', 'maxmemory', '1');
        return async () => void (await admin.config('SET', 'maxmemory', '0'));
      },
    ],
    ['MISCONF', 'REDIS_PERSISTENCE_FAILED', 'persistence-failing', failingSave],
    [
      'NOREPLICAS',
      'REDIS_NOT_ENOUGH_REPLICAS',
      null,
      async () => {
        await admin.config('SET', 'min-replicas-to-write', '1');
        return async () => void (await admin.config('SET', 'min-replicas-to-write', '0'));
      },
    ],
    ['READONLY', 'REDIS_READ_ONLY', 'read-only', demoted],
  ];

  it.each(cases)('%s: 503 %s with Retry-After, nothing written, /health: %s', async (_reply, code, problem, cause) => {
    const productId = `refused-${++products}`;
    await startSale(stack.url, productId, 5);
    const k = stack.keys.product(productId);
    const stored = async () => [await admin.get(k.stock), await admin.xlen(k.orders), await admin.hgetall(k.buyers)];
    const before = await stored();
    const undo = await cause();
    try {
      // A burst, as a sale would send: one batch, one refusal for all.
      const answers = await Promise.all(
        Array.from({ length: 5 }, (_, i) =>
          request(stack.url, 'POST', '/api/orders', { json: { productId, userId: `u${i}` } }),
        ),
      );
      for (const res of answers) {
        expect(res.status).toBe(503);
        expect(res.body).toMatchObject({ statusCode: 503, code });
        expect(res.headers.get('retry-after')).toBe('1');
      }
      const health = await request(stack.url, 'GET', '/health');
      if (problem) {
        // Redis answers (it is not down), but would refuse a write: it says which it is.
        expect(health.status).toBe(503);
        expect(health.body).toMatchObject({ status: 'unavailable', redis: 'refusing', problems: [problem] });
        const ready = await request(stack.url, 'GET', '/health/ready');
        expect(ready.body).toMatchObject({ status: 'unavailable', redis: 'refusing', problems: [problem] });
      }
      // A read is never refused for memory: the product is answered, as it is.
      const product = await request(stack.url, 'GET', `/api/products/${productId}`);
      expect({ status: product.status, stock: product.body.stock }).toEqual({ status: 200, stock: 5 });
      expect(await stored()).toEqual(before);
    } finally {
      await undo();
    }
    expect((await request(stack.url, 'GET', '/health')).status).toBe(200);
    const res = await request(stack.url, 'POST', '/api/orders', { json: { productId, userId: 'after' } });
    expect(res.status).toBe(201);
  });

  it('/health: 503 with problems ["eviction"] when maxmemory-policy is changed to one that evicts, 200 again after', async () => {
    await admin.config('SET', 'maxmemory-policy', 'volatile-lru');
    try {
      const health = await request(stack.url, 'GET', '/health');
      expect(health.status).toBe(503);
      expect(health.body).toMatchObject({ status: 'unavailable', redis: 'refusing', problems: ['eviction'] });
    } finally {
      await admin.config('SET', 'maxmemory-policy', 'noeviction');
    }
    const health = await request(stack.url, 'GET', '/health');
    expect(health.status).toBe(200);
    expect(health.body).not.toHaveProperty('problems');
  });
});
