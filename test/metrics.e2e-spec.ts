import { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { PinoLogger } from 'nestjs-pino';
import { DoorRefusals } from '../src/door/door-refusals';
import { Lock } from '../src/locks/lock';
import { MeteredLock } from '../src/locks/metered-lock';
import { KeyLayout } from '../src/redis/key-layout';
import { request, startSale, startTestApp, TestApp } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix, whileWritesHeld } from './helpers/redis';

/** One sample of a scrape: `name{labels} value`. */
interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

function parseScrape(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (type) types.set(type[1], type[2]);
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels = Object.fromEntries(
      [...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]),
    );
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return { types, samples };
}

/** The value of the sample `name` whose labels include `labels`; 0 if there is none. */
function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  return found?.value ?? 0;
}

async function scrape(url: string): Promise<{ contentType: string | null; text: string }> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  return { contentType: res.headers.get('content-type'), text: await res.text() };
}

const FAMILIES = {
  seckill_info: 'gauge',
  seckill_purchases_total: 'counter',
  seckill_purchases_in_progress: 'gauge',
  seckill_lock_wait_seconds: 'histogram',
  seckill_lock_hold_seconds: 'histogram',
  seckill_batch_size: 'histogram',
  seckill_lost_locks_total: 'counter',
  seckill_redis_errors_total: 'counter',
  seckill_door_refusals_total: 'counter',
  seckill_http_request_duration_seconds: 'histogram',
  seckill_loop_redis_commands_total: 'counter',
  seckill_loop_passes_total: 'counter',
  seckill_loop_work: 'gauge',
  seckill_escrow_moves_total: 'counter',
};

describe('GET /metrics (Prometheus, prom-client)', () => {
  let redis: TestRedis;
  let client: Redis;

  beforeAll(async () => {
    redis = await startTestRedis();
    client = new Redis(redis.url);
  });

  afterAll(async () => {
    await closeClient(client);
    await redis?.stop();
  });

  describe('after a real sale (fenced, stock 20, 60 buyers)', () => {
    let t: TestApp;
    let text: string;
    let contentType: string | null;
    const answers = new Map<string, number>();
    // Distinctive, so a scrape that carried one would be found.
    const userOf = (i: number) => `zq7buyer${i}x`;
    const product = 'zq7product';

    beforeAll(async () => {
      t = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: uniquePrefix('metrics'), LOCK_STRATEGY: 'fenced' });
      await startSale(t.url, product, 20);
      const results = await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          request(t.url, 'POST', '/api/orders', { json: { productId: product, userId: userOf(i) } }),
        ),
      );
      for (const r of results) {
        const code = r.status === 201 ? 'CREATED' : String(r.body.code);
        answers.set(code, (answers.get(code) ?? 0) + 1);
      }
      // Not purchases: refused as bad input, the body by validation before the route's
      // handler, the malformed Idempotency-Key by the handler before the purchase begins.
      const bad = await Promise.all([
        request(t.url, 'POST', '/api/orders', { json: { productId: product } }),
        request(t.url, 'POST', '/api/orders', {
          json: { productId: product, userId: userOf(99) },
          headers: { 'idempotency-key': 'has "quotes" inside' },
        }),
      ]);
      expect(bad.map((r) => [r.status, r.body.code])).toEqual([
        [400, 'VALIDATION_FAILED'],
        [400, 'VALIDATION_FAILED'],
      ]);
      ({ contentType, text } = await scrape(t.url));
    });

    afterAll(() => t?.close());

    it('serves the Prometheus text format', () => {
      expect(contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    });

    it('has every family with its TYPE, and Node’s default process metrics', () => {
      const { types, samples } = parseScrape(text);
      for (const [name, type] of Object.entries(FAMILIES)) expect([name, types.get(name)]).toEqual([name, type]);
      expect(types.get('process_cpu_seconds_total')).toBe('counter');
      expect(types.get('nodejs_eventloop_lag_seconds')).toBe('gauge');
      expect(samples.some((s) => s.name === 'process_resident_memory_bytes')).toBe(true);
      expect(valueOf(samples, 'seckill_info', { strategy: 'fenced', telemetry: '1' })).toBe(1);
    });

    it('says what the expiry loop costs Redis: idle, one command per round, whatever is listed', async () => {
      const first = parseScrape((await scrape(t.url)).text).samples;
      const loop = { loop: 'expiry' };
      // Rounds go on every EXPIRY_SWEEP_MS: wait for two more.
      let next = first;
      while (valueOf(next, 'seckill_loop_passes_total', loop) < valueOf(first, 'seckill_loop_passes_total', loop) + 2) {
        await sleep(100);
        next = parseScrape((await scrape(t.url)).text).samples;
      }
      const rounds =
        valueOf(next, 'seckill_loop_passes_total', loop) - valueOf(first, 'seckill_loop_passes_total', loop);
      const commands =
        valueOf(next, 'seckill_loop_redis_commands_total', loop) -
        valueOf(first, 'seckill_loop_redis_commands_total', loop);
      expect(commands).toBe(rounds);
      expect(valueOf(next, 'seckill_loop_work', loop)).toBe(0);
    });

    it('counts each answer once, by code, exactly as the buyers were answered', () => {
      const { samples } = parseScrape(text);
      expect(answers.get('CREATED')).toBe(20);
      const counted = Object.fromEntries(
        samples.filter((s) => s.name === 'seckill_purchases_total').map((s) => [s.labels.code, s.value]),
      );
      expect(counted).toEqual(Object.fromEntries(answers));
      expect(valueOf(samples, 'seckill_purchases_in_progress')).toBe(0);
    });

    it('times every hold and counts the buyers each batch served', () => {
      const { samples } = parseScrape(text);
      const holds = valueOf(samples, 'seckill_lock_hold_seconds_count');
      const waits = valueOf(samples, 'seckill_lock_wait_seconds_count', { outcome: 'acquired' });
      const batches = valueOf(samples, 'seckill_batch_size_count');
      // Every hold was waited for; every hold but the sale's start (PUT, a reset under the lock) served a batch.
      expect(holds).toBeGreaterThan(0);
      expect(waits).toBe(holds);
      // No wait ended without the lock, and every outcome is there from the start.
      for (const outcome of ['timeout', 'aborted', 'error']) {
        expect([outcome, valueOf(samples, 'seckill_lock_wait_seconds_count', { outcome })]).toEqual([outcome, 0]);
      }
      expect(
        [
          ...new Set(samples.filter((s) => s.name.startsWith('seckill_lock_wait_')).map((s) => s.labels.outcome)),
        ].sort(),
      ).toEqual(['aborted', 'acquired', 'error', 'timeout']);
      expect(batches).toBe(holds - 1);
      expect(valueOf(samples, 'seckill_lock_hold_seconds_sum')).toBeGreaterThan(0);
      expect(valueOf(samples, 'seckill_lock_hold_seconds_bucket', { le: '+Inf' })).toBe(holds);
      // Every 201 was served by a hold; a buyer the unlocked read refused never reached one.
      const served = valueOf(samples, 'seckill_batch_size_sum');
      expect(served).toBeGreaterThanOrEqual(20);
      expect(served).toBeLessThanOrEqual(60);
      expect(valueOf(samples, 'seckill_lost_locks_total')).toBe(0);
      expect(valueOf(samples, 'seckill_redis_errors_total', { kind: 'unavailable' })).toBe(0);
    });

    it('never carries a user id or a product id', () => {
      expect(text).not.toMatch(/zq7/);
    });

    it('builds no per-request logger: nestjs-pino mounts its pino-http middleware on no route', async () => {
      // pino-http's middleware makes a child of the root logger for every request it sees.
      const child = jest.spyOn(PinoLogger.root, 'child');
      try {
        await request(t.url, 'POST', '/api/orders', { json: { productId: product, userId: 'late' } });
        await request(t.url, 'GET', `/api/products/${product}`);
        await scrape(t.url);
        expect(child).not.toHaveBeenCalled();
      } finally {
        child.mockRestore();
      }
    });
  });

  it('counts a replay (the same Idempotency-Key again) apart, REPLAYED: CREATED counts the orders written', async () => {
    const prefix = uniquePrefix('replays');
    const t = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: prefix });
    try {
      await startSale(t.url, 'replayed', 10);
      const buy = (userId: string, key?: string) =>
        request(t.url, 'POST', '/api/orders', {
          json: { productId: 'replayed', userId },
          headers: key ? { 'idempotency-key': key } : {},
        });
      const first = await buy('ann', 'ann-1');
      expect(first.status).toBe(201);
      for (let i = 0; i < 3; i++) {
        const again = await buy('ann', 'ann-1');
        expect([again.status, again.headers.get('idempotent-replayed'), again.body.orderId]).toEqual([
          201,
          'true',
          first.body.orderId,
        ]);
      }
      expect((await buy('bob')).status).toBe(201);
      const { samples } = parseScrape((await scrape(t.url)).text);
      const counted = Object.fromEntries(
        samples.filter((s) => s.name === 'seckill_purchases_total').map((s) => [s.labels.code, s.value]),
      );
      expect(counted).toEqual({ CREATED: 2, REPLAYED: 3 });
      expect(await client.hlen(new KeyLayout(prefix).product('replayed').states)).toBe(2);
    } finally {
      await t.close();
    }
  });

  it("times every HTTP answer by method, route pattern and status: a hook's, the door's, an error's, no route's", async () => {
    const t = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: uniquePrefix('http') });
    try {
      await startSale(t.url, 'zq7timed', 1);
      const door = t.app.get(DoorRefusals);
      const statuses = [
        await request(t.url, 'POST', '/api/orders', { json: { productId: 'zq7timed', userId: 'zq7a' } }),
        await request(t.url, 'POST', '/api/orders', { json: { productId: 'zq7timed', userId: 'zq7b' } }),
        // Sold out: the door learnt it from the refusal above, and answers the product route itself.
        await request(t.url, 'POST', '/api/products/zq7timed/orders', { json: { userId: 'zq7c' } }),
        await request(t.url, 'POST', '/api/orders', { json: { productId: 'zq7timed' } }),
        await request(t.url, 'GET', '/zq7/nothing'),
        await request(t.url, 'GET', `/api/products/zq7${'x'.repeat(128)}`),
        // Methods no API is asked with: one label for them all, however many a client sends.
        await request(t.url, 'PROPFIND', '/zq7/nothing'),
        await request(t.url, 'MKCOL', '/zq7/nothing'),
      ].map((r) => r.status);
      expect(statuses).toEqual([201, 409, 409, 400, 404, 414, 404, 404]);
      expect(door.answered).toBe(1);
      const { text } = await scrape(t.url);
      const { samples } = parseScrape(text);
      const counts = samples
        // Not /health, which the test's start-up polled until Redis was connected.
        .filter((s) => s.name === 'seckill_http_request_duration_seconds_count' && s.labels.route !== '/health')
        .map((s) => [s.labels.method, s.labels.route, s.labels.status, s.value]);
      expect(counts.sort()).toEqual(
        [
          ['PUT', '/api/products/:id', '200', 1],
          ['POST', '/api/orders', '201', 1],
          ['POST', '/api/orders', '409', 1],
          ['POST', '/api/products/:id/orders', '409', 1],
          ['POST', '/api/orders', '400', 1],
          // A path no route serves, and one the router refused: one label, never the URL.
          ['GET', 'unmatched', '404', 1],
          ['GET', 'unmatched', '414', 1],
          ['other', 'unmatched', '404', 2],
        ].sort(),
      );
      expect(
        valueOf(samples, 'seckill_http_request_duration_seconds_bucket', {
          route: '/api/orders',
          status: '201',
          le: '+Inf',
        }),
      ).toBe(1);
      expect(
        valueOf(samples, 'seckill_http_request_duration_seconds_sum', { route: '/api/orders', status: '201' }),
      ).toBeGreaterThan(0);
      expect(text).not.toMatch(/zq7/);
    } finally {
      await t.close();
    }
  });

  it('counts a lost lock (read from the lock at scrape time) and logs it once', async () => {
    const prefix = uniquePrefix('lost');
    const t = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: prefix, LOCK_STRATEGY: 'fenced' });
    const warn = jest.spyOn(Logger.prototype, 'warn');
    try {
      const lock = t.app.get(Lock);
      expect(lock).toBeInstanceOf(MeteredLock);
      const key = new KeyLayout(prefix).product('gone').lock;
      // The hold loses its lock for certain: the key is deleted under it (as an expiry
      // would), so the release finds it no longer ours.
      await lock.using(key, async () => {
        await client.del(key);
      });
      const { samples } = parseScrape((await scrape(t.url)).text);
      expect(valueOf(samples, 'seckill_lost_locks_total')).toBe(1);
      expect((await request(t.url, 'GET', '/health')).body.lostLocks).toBe(1);
      const said = warn.mock.calls.map(([message]) => String(message)).filter((m) => m.includes(key));
      expect(said).toEqual([expect.stringMatching(/^lock .* was no longer ours at release/)]);
    } finally {
      warn.mockRestore();
      await t.close();
    }
  });

  describe('waits that end without the lock', () => {
    let t: TestApp;
    let prefix: string;
    const waits = async (outcome: string) =>
      valueOf(parseScrape((await scrape(t.url)).text).samples, 'seckill_lock_wait_seconds_count', { outcome });
    /** Scrapes until `read` gives `want` (a buyer hears LOCK_TIMEOUT from its own timer, a moment before the lock's wait ends). */
    const eventually = async (read: () => Promise<number>, want: number) => {
      const deadline = Date.now() + 5_000;
      while ((await read()) !== want && Date.now() < deadline) await sleep(20);
      return read();
    };

    beforeEach(async () => {
      prefix = uniquePrefix('waits');
      t = await startTestApp({
        REDIS_URL: redis.url,
        KEY_PREFIX: prefix,
        LOCK_STRATEGY: 'fenced',
        LOCK_WAIT_MS: '200',
      });
    });

    afterEach(() => t?.close());

    it('records a wait that ended in LOCK_TIMEOUT, labelled timeout, with no hold', async () => {
      await startSale(t.url, 'busy', 5);
      const before = parseScrape((await scrape(t.url)).text).samples;
      const lockKey = new KeyLayout(prefix).product('busy').lock;
      // Someone else holds the lock for longer than the buyer may wait.
      await client.set(lockKey, 'someone-else', 'PX', 60_000);
      const res = await request(t.url, 'POST', '/api/orders', { json: { productId: 'busy', userId: 'u1' } });
      expect([res.status, res.body.code]).toEqual([503, 'LOCK_TIMEOUT']);
      expect(await eventually(() => waits('timeout'), 1)).toBe(1);
      const { samples } = parseScrape((await scrape(t.url)).text);
      // A wait was recorded (its length is the machine's business: no test asserts a time).
      expect(valueOf(samples, 'seckill_lock_wait_seconds_sum', { outcome: 'timeout' })).toBeGreaterThan(0);
      expect(valueOf(samples, 'seckill_lock_wait_seconds_count', { outcome: 'acquired' })).toBe(
        valueOf(before, 'seckill_lock_wait_seconds_count', { outcome: 'acquired' }),
      );
      expect(valueOf(samples, 'seckill_lock_hold_seconds_count')).toBe(
        valueOf(before, 'seckill_lock_hold_seconds_count'),
      );
      await client.del(lockKey);
    });

    it('records an aborted wait (aborted) and a wait that failed (error)', async () => {
      const lock = t.app.get(Lock);
      const keys = new KeyLayout(prefix);
      const held = keys.product('held').lock;
      await client.set(held, 'someone-else', 'PX', 60_000);
      const stop = new AbortController();
      const waiting = lock.using(held, () => Promise.resolve(), {
        signal: stop.signal,
        deadline: performance.now() + 10_000,
      });
      await sleep(50);
      stop.abort(new Error('sold out meanwhile'));
      await expect(waiting).rejects.toThrow('sold out meanwhile');
      // The fencing counter is not a number: the acquire script's INCR fails with an error reply.
      const broken = keys.product('broken');
      await client.hset(broken.fence, 'not', 'a counter');
      await expect(lock.using(broken.lock, () => Promise.resolve())).rejects.toThrow(/WRONGTYPE/);
      const { samples } = parseScrape((await scrape(t.url)).text);
      expect(
        ['acquired', 'timeout', 'aborted', 'error'].map((outcome) =>
          valueOf(samples, 'seckill_lock_wait_seconds_count', { outcome }),
        ),
      ).toEqual([0, 0, 1, 1]);
      expect(valueOf(samples, 'seckill_lock_hold_seconds_count')).toBe(0);
      await client.del(held);
    });

    it('a hold whose buyers all timed out while it was taken is not a batch of 0', async () => {
      await startSale(t.url, 'slow', 5);
      const holds = () =>
        scrape(t.url).then(({ text }) => valueOf(parseScrape(text).samples, 'seckill_lock_hold_seconds_count'));
      const before = await holds();
      // Writes paused past the buyer's 200 ms: its unlocked read answers, the lock's SET NX
      // waits in Redis, the buyer hears LOCK_TIMEOUT; then the SET runs and the hold finds nobody.
      const res = await whileWritesHeld(client, async () => {
        const answer = await request(t.url, 'POST', '/api/orders', { json: { productId: 'slow', userId: 'u1' } });
        await sleep(300);
        return answer;
      });
      expect([res.status, res.body.code]).toEqual([503, 'LOCK_TIMEOUT']);
      expect(await eventually(holds, before + 1)).toBe(before + 1);
      const { samples } = parseScrape((await scrape(t.url)).text);
      expect(valueOf(samples, 'seckill_batch_size_count')).toBe(0);
      expect(valueOf(samples, 'seckill_lock_wait_seconds_count', { outcome: 'acquired' })).toBe(before + 1);
    });
  });

  it('counts answers REDIS_UNAVAILABLE and connection errors when Redis is gone', async () => {
    const own = await startTestRedis();
    const t = await startTestApp({ REDIS_URL: own.url, KEY_PREFIX: uniquePrefix('gone') });
    try {
      await startSale(t.url, 'p', 5);
      await own.stop();
      const res = await request(t.url, 'POST', '/api/orders', { json: { productId: 'p', userId: 'u1' } });
      expect(res.body.code).toBe('REDIS_UNAVAILABLE');
      const { samples } = parseScrape((await scrape(t.url)).text);
      expect(valueOf(samples, 'seckill_purchases_total', { code: 'REDIS_UNAVAILABLE' })).toBe(1);
      expect(valueOf(samples, 'seckill_redis_errors_total', { kind: 'unavailable' })).toBe(1);
      expect(valueOf(samples, 'seckill_redis_errors_total', { kind: 'outcome_unknown' })).toBe(0);
      // The first reconnect attempt fails a moment after the connection closed.
      const connectionErrors = async () =>
        valueOf(parseScrape((await scrape(t.url)).text).samples, 'seckill_redis_errors_total', { kind: 'connection' });
      const deadline = Date.now() + 5_000;
      while ((await connectionErrors()) === 0 && Date.now() < deadline) await sleep(50);
      expect(await connectionErrors()).toBeGreaterThan(0);
    } finally {
      await t.close();
    }
  });

  it('with TELEMETRY=0 records nothing: no listener, the lock unwrapped, only process metrics and seckill_info', async () => {
    const t = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: uniquePrefix('off'), TELEMETRY: '0' });
    try {
      expect(t.app.get(Lock)).not.toBeInstanceOf(MeteredLock);
      await startSale(t.url, 'p', 5);
      expect((await request(t.url, 'POST', '/api/orders', { json: { productId: 'p', userId: 'u1' } })).status).toBe(
        201,
      );
      const { types, samples } = parseScrape((await scrape(t.url)).text);
      expect([...types.keys()].filter((name) => name.startsWith('seckill_'))).toEqual(['seckill_info']);
      expect(valueOf(samples, 'seckill_info', { strategy: 'fenced', telemetry: '0' })).toBe(1);
      expect(types.get('process_cpu_seconds_total')).toBe('counter');
    } finally {
      await t.close();
    }
  });
});
