import { Redis } from 'ioredis';
import { KeyLayout } from '../src/redis/key-layout';
import { request, startSale, startTestApp, TestApp } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

/**
 * RATE_LIMIT_PER_IP and RATE_LIMIT_PER_USER (src/door): counted in Redis, shared by
 * every instance, answered 429 at the door before the body is parsed, and a refusal
 * changes nothing. Windows are a minute long, so no count expires during a test.
 */
describe('rate limits at the door', () => {
  let redis: TestRedis;
  let client: Redis;
  const apps: TestApp[] = [];

  beforeAll(async () => {
    redis = await startTestRedis();
    client = new Redis(redis.url);
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    await closeClient(client);
    await redis?.stop();
  });

  /** An app on the shared Redis; apps given the same prefix share their counts. */
  async function app(env: Record<string, string>, prefix = uniquePrefix('rate')): Promise<TestApp> {
    const started = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: prefix, ...env });
    apps.push(started);
    return started;
  }
  const buy = (url: string, userId: string, headers: Record<string, string> = {}) =>
    request(url, 'POST', '/api/orders', { json: { productId: 'phone', userId }, headers });

  async function snapshot(keys: KeyLayout) {
    const k = keys.product('phone');
    const [stock, buyers, orders] = await Promise.all([
      client.get(k.stock),
      client.hgetall(k.buyers),
      client.xlen(k.orders),
    ]);
    return { stock, buyers, orders };
  }

  it('answers the request over RATE_LIMIT_PER_IP 429 RATE_LIMITED, with Retry-After and the draft RateLimit headers, and changes nothing', async () => {
    const prefix = uniquePrefix('ip');
    const a = await app({ RATE_LIMIT_PER_IP: '3/60s' }, prefix);
    // The admin route is not behind the door: the sale's set-up counts nothing.
    await startSale(a.url, 'phone', 100, 5);
    for (let i = 0; i < 3; i++) expect((await buy(a.url, `u${i}`)).status).toBe(201);
    const before = await snapshot(new KeyLayout(prefix));
    const res = await buy(a.url, 'u3');
    expect(res.status).toBe(429);
    expect(res.body).toMatchObject({ statusCode: 429, code: 'RATE_LIMITED' });
    const retryAfter = Number(res.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(res.headers.get('ratelimit-policy')).toBe('"ip";q=3;w=60');
    expect(res.headers.get('ratelimit')).toBe(`"ip";r=0;t=${retryAfter}`);
    expect(await snapshot(new KeyLayout(prefix))).toEqual(before);
    expect(before.orders).toBe(3);
    // The count is Redis's, under the app's prefix, and it expires with its window.
    const ttl = await client.pttl(`${prefix}rate:ip:127.0.0.1`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
    // Redis said "over" once (the count is 4: three served, one refused); for the rest of
    // the window this instance says it from memory: a flood of refusals costs no Redis
    // call, so the count does not move.
    const counted = `${prefix}rate:ip:127.0.0.1`;
    expect(await client.get(counted)).toBe('4');
    const flood = await Promise.all(Array.from({ length: 20 }, (_, i) => buy(a.url, `f${i}`)));
    expect(flood.map((r) => r.status)).toEqual(Array(20).fill(429));
    expect(await client.get(counted)).toBe('4');
    // Counted apart from the purchases: the route never saw it.
    const metrics = await (await fetch(`${a.url}/metrics`)).text();
    expect(metrics).toMatch(/^seckill_door_refusals_total\{code="RATE_LIMITED"\} 21$/m);
    expect(metrics).toMatch(/^seckill_purchases_total\{code="CREATED"\} 3$/m);
    expect(metrics).not.toMatch(/^seckill_purchases_total\{code="RATE_LIMITED"\}/m);
    // Not the probes, not the product's GET: only the door's routes are limited.
    expect((await request(a.url, 'GET', '/health')).status).toBe(200);
    expect((await request(a.url, 'GET', '/api/products/phone')).status).toBe(200);
  });

  it('refuses at the door, before the body is parsed: an over-limit request with broken JSON gets 429, not 400', async () => {
    const a = await app({ RATE_LIMIT_PER_IP: '1/60s' });
    const broken = () =>
      request(a.url, 'POST', '/api/orders', { raw: '{"productId": ', headers: { 'content-type': 'application/json' } });
    // Within the limit, the same body is parsed and refused for what it is.
    const first = await broken();
    expect(first.status).toBe(400);
    const second = await broken();
    expect(second.status).toBe(429);
    expect(second.body.code).toBe('RATE_LIMITED');
  });

  it('shares one count between two app instances on one Redis', async () => {
    const prefix = uniquePrefix('shared');
    const a = await app({ RATE_LIMIT_PER_IP: '4/60s' }, prefix);
    const b = await app({ RATE_LIMIT_PER_IP: '4/60s' }, prefix);
    await startSale(a.url, 'phone', 100, 5);
    const statuses = [];
    // Alternating: each instance alone saw only 2 or 3, under its limit of 4.
    for (let i = 0; i < 6; i++) statuses.push((await buy(i % 2 === 0 ? a.url : b.url, `s${i}`)).status);
    expect(statuses).toEqual([201, 201, 201, 201, 429, 429]);
    expect(await client.xlen(new KeyLayout(prefix).product('phone').orders)).toBe(4);
  });

  it('counts by request.ip: X-Forwarded-For is ignored without TRUST_PROXY and honoured with it', async () => {
    const untrusting = await app({ RATE_LIMIT_PER_IP: '2/60s' });
    const spoofed = await Promise.all(
      [1, 2, 3].map(async (i) => (await buy(untrusting.url, `x${i}`, { 'x-forwarded-for': `203.0.113.${i}` })).status),
    );
    // Three "clients" that are one socket peer: the third is refused (whatever the sale said to the first two).
    expect(spoofed.filter((s) => s === 429)).toHaveLength(1);

    const prefix = uniquePrefix('proxied');
    const trusting = await app({ RATE_LIMIT_PER_IP: '2/60s', TRUST_PROXY: 'loopback' }, prefix);
    await startSale(trusting.url, 'phone', 100, 5);
    for (let i = 1; i <= 3; i++) {
      expect((await buy(trusting.url, `y${i}`, { 'x-forwarded-for': `203.0.113.${i}` })).status).toBe(201);
    }
    expect(await client.exists(`${prefix}rate:ip:203.0.113.1`)).toBe(1);
    expect(await client.exists(`${prefix}rate:ip:127.0.0.1`)).toBe(0);
    const same = [];
    for (let i = 0; i < 3; i++)
      same.push((await buy(trusting.url, `z${i}`, { 'x-forwarded-for': '198.51.100.7' })).status);
    expect(same).toEqual([201, 201, 429]);
  });

  it("limits each userId by RATE_LIMIT_PER_USER (the body's, without BUYER_AUTH), and only that user", async () => {
    const prefix = uniquePrefix('user');
    const a = await app({ RATE_LIMIT_PER_USER: '2/60s' }, prefix);
    await startSale(a.url, 'phone', 100, 1);
    // The second purchase is a sale refusal (perUserLimit 1), and still counts as a request.
    expect((await buy(a.url, 'alice')).status).toBe(201);
    expect((await buy(a.url, 'alice')).status).toBe(409);
    const before = await snapshot(new KeyLayout(prefix));
    const refused = await buy(a.url, 'alice');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('ratelimit-policy')).toBe('"user";q=2;w=60');
    expect(refused.headers.get('ratelimit')).toMatch(/^"user";r=0;t=\d+$/);
    expect(await snapshot(new KeyLayout(prefix))).toEqual(before);
    expect((await buy(a.url, 'bob')).status).toBe(201);
    // A body that fails validation is refused for that, and counts for no user.
    const invalid = await request(a.url, 'POST', '/api/orders', {
      json: { productId: 'phone', userId: 'bob', quantity: 0 },
    });
    expect(invalid.status).toBe(400);
    expect(await client.get(`${prefix}rate:user:bob`)).toBe('1'); // The same on the queue join, whose body is checked by its schema too: an unknown
    // field or a userId that is no id counts for no one, and stores nothing.
    for (const json of [{ userId: 'carol', junk: 1 }, { userId: 'x'.repeat(5_000) }, { userId: '{a}/../x y' }]) {
      expect((await request(a.url, 'POST', '/api/products/phone/queue', { json })).status).toBe(400);
    }
    expect(await client.keys(`${prefix}rate:user:*`)).toEqual(expect.arrayContaining([`${prefix}rate:user:bob`]));
    expect((await client.keys(`${prefix}rate:user:*`)).sort()).toEqual([
      `${prefix}rate:user:alice`,
      `${prefix}rate:user:bob`,
    ]);
  });

  it('fails closed: with its Redis gone, a limited route answers 503 REDIS_UNAVAILABLE', async () => {
    const own = await startTestRedis();
    const a = await startTestApp({ REDIS_URL: own.url, KEY_PREFIX: uniquePrefix('down'), RATE_LIMIT_PER_IP: '5/60s' });
    try {
      own.kill();
      await own.exited;
      const res = await buy(a.url, 'u1');
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('REDIS_UNAVAILABLE');
      expect(res.headers.get('retry-after')).toBe('1');
    } finally {
      await a.close();
      await own.stop();
    }
  });
});
