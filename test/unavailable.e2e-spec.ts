import { Redis } from 'ioredis';
import { KeyLayout } from '../src/redis/key-layout';
import { request, startSale } from './helpers/app';
import { closeClient } from './helpers/redis';
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
    expect((await request(t.url, 'POST', '/api/orders', { json: { productId: 'held', userId: 'ivy' } })).status).toBe(201);
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
