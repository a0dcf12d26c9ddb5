import { Redis } from 'ioredis';
import { KeyLayout } from '../src/redis/key-layout';
import { request, startSale } from './helpers/app';
import { closeClient, startTestRedis } from './helpers/redis';
import { startTestStack, TestStack } from './helpers/stack';

describe('503 answers: lock not obtained, Redis gone', () => {
  let stack: TestStack;
  let t: { url: string };
  let client: Redis;
  let keys: KeyLayout;

  beforeAll(async () => {
    stack = await startTestStack('unavailable', { LOCK_WAIT_MS: '200' });
    ({ client, keys } = stack);
    t = stack;
  });

  afterAll(() => stack?.close());

  it('answers 503 LOCK_TIMEOUT with Retry-After when the lock stays held past LOCK_WAIT_MS, and changes nothing', async () => {
    await startSale(t.url, 'held', 5);
    const k = keys.product('held');
    // Another holder (another process) has the lock for longer than we will wait.
    await client.set(k.lock, 'another-holders-token', 'PX', 10_000);
    const res = await request(t.url, 'POST', '/api/orders', { json: { productId: 'held', userId: 'ivy' } });
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ statusCode: 503, code: 'LOCK_TIMEOUT' });
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await client.get(k.stock)).toBe('5');
    expect(await client.xlen(k.orders)).toBe(0);
    expect(await client.get(k.lock)).toBe('another-holders-token');
    await client.del(k.lock);
    expect((await request(t.url, 'POST', '/api/orders', { json: { productId: 'held', userId: 'ivy' } })).status).toBe(
      201,
    );
  });

  it('answers 503 REDIS_UNAVAILABLE with Retry-After when Redis is gone, and /health says 503', async () => {
    await startSale(t.url, 'gone', 5);
    await closeClient(client);
    await stack.redis.stop();
    const res = await request(t.url, 'POST', '/api/orders', { json: { productId: 'gone', userId: 'jack' } });
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ statusCode: 503, code: 'REDIS_UNAVAILABLE' });
    expect(res.headers.get('retry-after')).toBe('1');
    const product = await request(t.url, 'GET', '/api/products/gone');
    expect(product.status).toBe(503);
    expect(product.body.code).toBe('REDIS_UNAVAILABLE');
    const health = await request(t.url, 'GET', '/health');
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ status: 'unavailable', redis: 'down' });
  });
});

describe('redlock: a majority of lock nodes down', () => {
  it('answers 503 LOCK_NODES_UNAVAILABLE, sells nothing, and /health says 503; one node down still sells', async () => {
    const nodes = await Promise.all([0, 1, 2].map(() => startTestRedis()));
    const stack = await startTestStack('redlock-down', {
      LOCK_STRATEGY: 'redlock',
      REDLOCK_URLS: nodes.map((n) => n.url).join(','),
    });
    try {
      await startSale(stack.url, 'quorum', 5);
      await nodes[2].stop();
      const one = await request(stack.url, 'POST', '/api/orders', { json: { productId: 'quorum', userId: 'kim' } });
      expect(one.status).toBe(201);

      await nodes[1].stop();
      const res = await request(stack.url, 'POST', '/api/orders', { json: { productId: 'quorum', userId: 'lee' } });
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ code: 'LOCK_NODES_UNAVAILABLE' });
      expect(res.body.message).toContain('2 of 3 Redlock nodes are unreachable');
      expect(res.headers.get('retry-after')).toBe('1');
      const k = stack.keys.product('quorum');
      expect(await stack.client.get(k.stock)).toBe('4');
      expect(await stack.client.xlen(k.orders)).toBe(1);

      const health = await request(stack.url, 'GET', '/health');
      expect(health.status).toBe(503);
      expect(health.body).toMatchObject({ redis: 'up', lockNodes: { up: 1, total: 3, quorum: 2 } });
    } finally {
      await stack.close();
      await Promise.all(nodes.map((n) => n.stop()));
    }
  });
});
