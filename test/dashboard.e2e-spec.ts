import { existsSync } from 'node:fs';
import { get, IncomingHttpHeaders } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { startApp, RunningApp, stopAll } from '../harness/processes';
import { APP_MAIN } from '../harness/paths';
import type { LiveEvent } from '../src/dashboard/live-event';
import { LiveFeed } from '../src/dashboard/live-feed';
import { KeyLayout } from '../src/redis/key-layout';
import { ADMIN_TOKEN, request, startSale, startTestApp, TestApp } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';
import { startTestStack, TestStack } from './helpers/stack';

/** An open GET /api/live/:productId, its events parsed as they arrive. */
interface Stream {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly events: LiveEvent[];
  /** Resolves when the server ends the stream. */
  readonly ended: Promise<void>;
  close(): void;
}

/** `from`: the client's address, as a proxy the app trusts (TRUST_PROXY) says it in X-Forwarded-For. */
function openStream(url: string, productId: string, from?: string): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const headers = from ? { 'x-forwarded-for': from } : {};
    const req = get(`${url}/api/live/${productId}`, { agent: false, headers }, (res) => {
      const events: LiveEvent[] = [];
      let buffered = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buffered += chunk;
        let end: number;
        while ((end = buffered.indexOf('\n\n')) >= 0) {
          const block = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          const data = block
            .split('\n')
            .filter((line) => line.startsWith('data: '))
            .map((line) => line.slice('data: '.length))
            .join('\n');
          if (data) events.push(JSON.parse(data) as LiveEvent);
        }
      });
      const ended = new Promise<void>((done) => res.once('close', () => done()));
      resolve({ status: res.statusCode!, headers: res.headers, events, ended, close: () => req.destroy() });
    });
    req.on('error', reject);
  });
}

/**
 * Reads the product's live event in the app's own process (LiveFeed.read, what each
 * stream event is) until it satisfies `test`, or fails with the last one read: no
 * stream, so no per-client stream bound to mind.
 */
async function readWhere(
  app: TestApp,
  productId: string,
  test: (e: LiveEvent) => boolean,
  withinMs = 5_000,
): Promise<LiveEvent> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const e = await app.app.get(LiveFeed).read(productId);
    if (test(e)) return e;
    if (Date.now() > deadline) throw new Error(`no such event within ${withinMs} ms; last: ${JSON.stringify(e)}`);
    await sleep(50);
  }
}

/** Waits for an event that satisfies `test` (checking new events only), or fails with the last one seen. */
async function eventWhere(stream: Stream, test: (e: LiveEvent) => boolean, withinMs = 5_000): Promise<LiveEvent> {
  const deadline = Date.now() + withinMs;
  let checked = 0;
  for (;;) {
    for (; checked < stream.events.length; checked++) if (test(stream.events[checked])) return stream.events[checked];
    if (Date.now() > deadline) {
      throw new Error(`no such event within ${withinMs} ms; last: ${JSON.stringify(stream.events.at(-1))}`);
    }
    await sleep(20);
  }
}

const sum = (e: LiveEvent, code: string) => e.instances.reduce((a, i) => a + (i.answers[code] ?? 0), 0);
const allAnswers = (e: LiveEvent) =>
  e.instances.reduce((a, i) => a + Object.values(i.answers).reduce((b, n) => b + n, 0), 0);

/** `count` purchases by distinct users, `concurrency` at a time; the answers by status. */
async function burst(urls: string[], productId: string, count: number, concurrency: number) {
  const statuses: number[] = [];
  const byUrl = new Map<string, number>(urls.map((u) => [u, 0]));
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        const url = urls[i % urls.length];
        const res = await request(url, 'POST', '/api/orders', { json: { productId, userId: `u${i}` } });
        statuses.push(res.status);
        if (res.status === 201) byUrl.set(url, byUrl.get(url)! + 1);
      }
    }),
  );
  return { statuses, created: statuses.filter((s) => s === 201).length, createdBy: byUrl };
}

describe('live dashboard: GET / and Server-Sent Events from the live aggregate', () => {
  describe('one app in this process', () => {
    let stack: TestStack;
    const streams: Stream[] = [];
    const watch = async (url: string, productId: string) => {
      const s = await openStream(url, productId);
      streams.push(s);
      return s;
    };

    beforeAll(async () => {
      stack = await startTestStack('live');
    });

    afterAll(async () => {
      for (const s of streams) s.close();
      await stack?.close();
    });

    it('serves the page, its script and style, and Chart.js from node_modules, nothing from a CDN', async () => {
      const page = await fetch(`${stack.url}/`);
      expect(page.status).toBe(200);
      expect(page.headers.get('content-type')).toMatch(/^text\/html/);
      const html = await page.text();
      for (const id of ['chart-stock', 'chart-orders', 'chart-answers', 'initial-stock', 'sale-state', 'instances']) {
        expect(html).toContain(`id="${id}"`);
      }
      expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
      for (const [path, type] of [
        ['/dashboard.js', /javascript/],
        ['/dashboard.css', /text\/css/],
        ['/assets/chart.umd.min.js', /javascript/],
      ] as const) {
        const res = await fetch(`${stack.url}${path}`);
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toMatch(type);
        expect((await res.text()).length).toBeGreaterThan(1000);
      }
      // Its icon, named by the page and where a browser looks for it on any other page: no 404 in its console.
      const icon = await fetch(`${stack.url}/favicon.ico`);
      expect({ status: icon.status, type: icon.headers.get('content-type') }).toEqual({
        status: 200,
        type: 'image/svg+xml',
      });
      expect(await icon.text()).toMatch(/^<svg /);
      expect(html).toContain('<link rel="icon" type="image/svg+xml" href="/favicon.ico" />');
    });

    it.each(['bad%20id', 'a'.repeat(65), 'x%7Bp%7D'])(
      'refuses the id %s with 400 VALIDATION_FAILED as JSON, not a stream',
      async (id) => {
        const res = await fetch(`${stack.url}/api/live/${id}`);
        expect(res.status).toBe(400);
        expect(res.headers.get('content-type')).toMatch(/^application\/json/);
        expect(await res.json()).toMatchObject({ statusCode: 400, code: 'VALIDATION_FAILED' });
      },
    );

    it('streams a product without a sale as nulls', async () => {
      const s = await watch(stack.url, 'nothing-here');
      expect(s.status).toBe(200);
      expect(s.headers['content-type']).toMatch(/^text\/event-stream/);
      const e = await eventWhere(s, () => true);
      expect(e).toMatchObject({ productId: 'nothing-here', strategy: 'fenced', telemetry: true });
      expect(e).toMatchObject({
        saleId: null,
        initialStock: null,
        stock: null,
        sold: null,
        orders: null,
        buckets: null,
        lock: null,
        instances: [],
      });
      s.close();
    });

    it('sends a few events a second however many requests arrive, and ends the sale agreeing with Redis', async () => {
      await startSale(stack.url, 'burst', 500);
      const s = await watch(stack.url, 'burst');
      const opened = Date.now();
      await eventWhere(s, (e) => e.initialStock === 500);
      const { statuses, created } = await burst([stack.url], 'burst', 2_000, 50);
      expect(statuses).toHaveLength(2_000);
      expect(created).toBe(500);
      // The last answers reach Redis at the next publish (250 ms), and the page at the next poll.
      const last = await eventWhere(s, (e) => sum(e, 'CREATED') === created && allAnswers(e) === 2_000);
      const elapsed = Date.now() - opened;
      // Four a second at most, plus the first at once: never one per request. (No lower
      // bound: a loaded machine may poll late, and no test asserts a time.)
      expect(s.events.length).toBeLessThanOrEqual(Math.ceil(elapsed / 250) + 2);
      expect(s.events.length).toBeGreaterThanOrEqual(2);

      const k = stack.keys.product('burst');
      const [stock, orders] = await Promise.all([stack.client.get(k.stock), stack.client.xlen(k.orders)]);
      expect(last).toMatchObject({ initialStock: 500, stock: Number(stock), sold: 500 - Number(stock) });
      expect(last.orders).toMatchObject({ written: orders, reserved: orders });
      expect(last.stock).toBe(0);
      // One bucket: the product's own figures (no read of its own).
      expect(last.buckets).toEqual([
        { id: 'burst', initialStock: 500, stock: 0, orders, inFlight: 0, lock: last.lock },
      ]);
      expect(sum(last, 'CREATED')).toBe(orders);
      expect(sum(last, 'SOLD_OUT')).toBe(statuses.filter((x) => x === 409).length);
      expect(last.instances).toHaveLength(1);
      expect(last.instances[0]).toMatchObject({ pid: process.pid, waiting: 0, lostLocks: 0 });
      expect(last.instances[0].id).toMatch(new RegExp(`/${process.pid}$`));

      // GET /api/live offers it to the page.
      const list = await request(stack.url, 'GET', '/api/live');
      expect(list.body.telemetry).toBe(true);
      expect(list.body.products.map((p: { productId: string }) => p.productId)).toContain('burst');
      expect(list.body.products.map((p: { productId: string }) => p.productId)).not.toContain('nothing-here');
    });

    it('shows a product sold from 3 escrow buckets as their sums, and each bucket as the admin view has it', async () => {
      const put = await request(stack.url, 'PUT', '/api/products/split', {
        json: { stock: 31, buckets: 3 },
        admin: true,
      });
      expect(put.status).toBe(200);
      const s = await watch(stack.url, 'split');
      const opened = await eventWhere(s, (e) => e.initialStock !== null);
      expect(opened).toMatchObject({ initialStock: 31, stock: 31, sold: 0 });
      expect(opened.buckets).toEqual([
        { id: 'split', initialStock: 11, stock: 11, orders: 0, inFlight: 0, lock: null },
        { id: 'split~1', initialStock: 10, stock: 10, orders: 0, inFlight: 0, lock: null },
        { id: 'split~2', initialStock: 10, stock: 10, orders: 0, inFlight: 0, lock: null },
      ]);
      // More buyers than units: dry buckets take rights from the others until every unit is sold.
      const { created } = await burst([stack.url], 'split', 40, 10);
      expect(created).toBe(31);
      const last = await eventWhere(s, (e) => e.sold === 31);
      const each = await request(stack.url, 'GET', '/api/products/split/buckets', { admin: true });
      expect(last.buckets).toEqual(
        each.body.map(({ id, initialStock, stock, orders, inFlight }: NonNullable<LiveEvent['buckets']>[number]) => ({
          id,
          initialStock,
          stock,
          orders,
          inFlight,
          // Every bucket's lock free once the burst is answered.
          lock: null,
        })),
      );
      expect(last).toMatchObject({ initialStock: 31, stock: 0 });
      // The orders over every bucket, as GET /api/products/:id sums them.
      expect(last.orders).toMatchObject({ written: 31, reserved: 31 });
      expect((await request(stack.url, 'GET', '/api/products/split')).body).toMatchObject({ orders: 31, sold: 31 });
    });

    it('restarting a sale starts its counts at 0, even with answers not yet published', async () => {
      await startSale(stack.url, 'again', 20);
      const s = await watch(stack.url, 'again');
      await burst([stack.url], 'again', 30, 10);
      // Right behind the answers, before the next publish has (always) happened.
      await startSale(stack.url, 'again', 7);
      const k = stack.keys.product('again');
      const fresh = await eventWhere(s, (e) => e.initialStock === 7 && e.instances.length === 1);
      expect(fresh).toMatchObject({ stock: 7, sold: 0 });
      expect(allAnswers(fresh)).toBe(0);
      await sleep(600);
      expect(allAnswers(s.events.at(-1)!)).toBe(0);
      expect((await burst([stack.url], 'again', 3, 1)).created).toBe(3);
      const after = await eventWhere(s, (e) => sum(e, 'CREATED') === 3);
      expect(allAnswers(after)).toBe(3);
      expect(await stack.client.hget(k.live, `${after.instances[0].id}|CREATED`)).toBe('3');
    });

    it('keeps the same sale when units come back: units held fall with the stock, the orders say what became of them', async () => {
      await startSale(stack.url, 'returns', 5);
      const s = await watch(stack.url, 'returns');
      const opened = await eventWhere(s, (e) => e.initialStock === 5);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await request(stack.url, 'POST', '/api/orders', {
          json: { productId: 'returns', userId: `r${i}` },
        });
        expect(res.status).toBe(201);
        ids.push(res.body.orderId);
      }
      await eventWhere(s, (e) => e.sold === 3);
      // One cancelled (its unit back in stock), one paid, one still reserved.
      expect((await request(stack.url, 'POST', `/api/orders/${ids[0]}/cancel`)).status).toBe(200);
      const paid = await request(stack.url, 'POST', `/api/orders/${ids[1]}/pay`, {
        json: { paymentId: 'pay-r1' },
        admin: true,
      });
      expect(paid.status).toBe(200);
      const after = await eventWhere(s, (e) => e.orders?.reserved === 1);
      const k = stack.keys.product('returns');
      expect(after).toMatchObject({ saleId: opened.saleId, initialStock: 5, stock: 3, sold: 2 });
      expect(after.orders).toEqual({ written: 3, reserved: 1, paid: 1, cancelled: 1, expired: 0, unitsReturned: 1 });
      expect([await stack.client.get(k.stock), await stack.client.hlen(k.states)]).toEqual(['3', 3]);
      expect(opened.saleId).toBe(Number(await stack.client.hget(k.meta, 'saleId')));
    });

    it('shows a replay (the same Idempotency-Key again) apart from the orders: REPLAYED, not CREATED', async () => {
      await startSale(stack.url, 'replays', 5);
      const buy = () =>
        request(stack.url, 'POST', '/api/orders', {
          json: { productId: 'replays', userId: 'once' },
          headers: { 'idempotency-key': 'once-1' },
        });
      const answers = [await buy(), await buy(), await buy()];
      expect(answers.map((a) => [a.status, a.headers.get('idempotent-replayed')])).toEqual([
        [201, null],
        [201, 'true'],
        [201, 'true'],
      ]);
      const e = await readWhere(stack.app, 'replays', (x) => allAnswers(x) === 3);
      expect([sum(e, 'CREATED'), sum(e, 'REPLAYED')]).toEqual([1, 2]);
      expect(e.orders).toMatchObject({ written: 1 });
    });

    it('counts a reservation expired at its deadline, its units back in stock', async () => {
      const put = await request(stack.url, 'PUT', '/api/products/expires', {
        json: { stock: 4, paymentTimeoutMs: 1_000 },
        admin: true,
      });
      expect(put.status).toBe(200);
      const bought = await request(stack.url, 'POST', '/api/orders', {
        json: { productId: 'expires', userId: 'late', quantity: 1 },
      });
      expect(bought.status).toBe(201);
      // The sweeper expires it once Redis's clock passes its deadline: a state to wait for.
      const e = await readWhere(stack.app, 'expires', (x) => x.orders?.expired === 1, 10_000);
      expect(e).toMatchObject({ stock: 4, sold: 0 });
      expect(e.orders).toEqual({ written: 1, reserved: 0, paid: 0, cancelled: 0, expired: 1, unitsReturned: 1 });
    });

    it('writes no live key for a product without a sale', async () => {
      const res = await request(stack.url, 'POST', '/api/orders', { json: { productId: 'ghost', userId: 'u1' } });
      expect(res.body.code).toBe('UNKNOWN_PRODUCT');
      await sleep(600);
      expect(await stack.client.exists(stack.keys.product('ghost').live)).toBe(0);
    });

    it('with TELEMETRY=0 publishes nothing and says so', async () => {
      const prefix = uniquePrefix('live-off');
      const off: TestApp = await startTestApp({ REDIS_URL: stack.redis.url, KEY_PREFIX: prefix, TELEMETRY: '0' });
      try {
        await startSale(off.url, 'quiet', 5);
        const s = await openStream(off.url, 'quiet');
        expect((await burst([off.url], 'quiet', 8, 4)).created).toBe(5);
        await sleep(600);
        const e = s.events.at(-1)!;
        s.close();
        expect(e).toMatchObject({ telemetry: false, initialStock: 5, stock: 0, sold: 5, instances: [] });
        expect(await stack.client.exists(new KeyLayout(prefix).product('quiet').live)).toBe(0);
        expect((await request(off.url, 'GET', '/api/live')).body).toMatchObject({ telemetry: false, products: [] });
      } finally {
        await off.close();
      }
    });
  });

  describe('bounds on watchers', () => {
    let stack: TestStack;
    const streams: Stream[] = [];

    beforeAll(async () => {
      // Behind a proxy on loopback (the test): X-Forwarded-For says who each client is.
      stack = await startTestStack('live-bounds', { TRUST_PROXY: 'loopback' });
    });

    /** Waits until the server has seen `closed` go and serves `productId` to `from` again. */
    async function reopen(productId: string, from: string): Promise<Stream> {
      for (;;) {
        const next = await openStream(stack.url, productId, from);
        if (next.status === 200) return next;
        next.close();
        await sleep(10);
      }
    }

    afterAll(async () => {
      for (const s of streams) s.close();
      await stack?.close();
    });

    it('polls at most 32 products: the 33rd is refused 503 TOO_MANY_WATCHERS as JSON, and a freed place is taken again', async () => {
      // 32 clients, one made-up product each.
      for (let i = 1; i <= 32; i++) {
        const s = await openStream(stack.url, `made-up-${i}`, `10.0.1.${i}`);
        streams.push(s);
        expect([i, s.status]).toEqual([i, 200]);
      }
      const refused = await request(stack.url, 'GET', '/api/live/made-up-33', {
        headers: { 'x-forwarded-for': '10.0.1.33' },
      });
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.body).toMatchObject({ statusCode: 503, code: 'TOO_MANY_WATCHERS' });
      // A product already polled is no new place: another watcher of it is served.
      const again = await openStream(stack.url, 'made-up-1', '10.0.1.33');
      streams.push(again);
      expect(again.status).toBe(200);
      // Closing every watcher of one product frees its place (the server sees each close).
      streams[0].close();
      again.close();
      streams.push(await reopen('made-up-34', '10.0.1.34'));
      for (const s of streams.splice(0)) s.close();
    });

    it('bounds each client: 4 products and 8 streams, then 503 for it alone; its places come back as its streams end', async () => {
      const greedy = '10.0.2.1';
      const mine: Stream[] = [];
      for (let i = 1; i <= 4; i++) mine.push(await openStream(stack.url, `greedy-${i}`, greedy));
      expect(mine.map((s) => s.status)).toEqual([200, 200, 200, 200]);
      const fifth = await request(stack.url, 'GET', '/api/live/greedy-5', { headers: { 'x-forwarded-for': greedy } });
      expect(fifth.status).toBe(503);
      expect(fifth.body).toMatchObject({
        code: 'TOO_MANY_WATCHERS',
        message: expect.stringContaining('this client already watches 4 products here'),
      });
      for (let i = 5; i <= 8; i++) mine.push(await openStream(stack.url, 'greedy-1', greedy));
      expect(mine.map((s) => s.status)).toEqual(Array(8).fill(200));
      const ninth = await request(stack.url, 'GET', '/api/live/greedy-1', { headers: { 'x-forwarded-for': greedy } });
      expect(ninth.status).toBe(503);
      expect(ninth.body.message).toContain('this client already holds 8 live streams here');
      // Anyone else is served meanwhile: the instance's bounds are far from reached.
      const other = await openStream(stack.url, 'greedy-5', '10.0.2.2');
      expect(other.status).toBe(200);
      other.close();
      // One of its streams ends: it may open one again.
      mine.shift()!.close();
      mine.push(await reopen('greedy-2', greedy));
      for (const s of mine) s.close();
    });
  });

  describe('the built app as processes', () => {
    let redis: TestRedis;
    let client: Redis;
    const apps: RunningApp[] = [];

    beforeAll(async () => {
      if (!existsSync(APP_MAIN)) throw new Error('dist/src/main.js is missing: run `npm run build` first');
      redis = await startTestRedis();
      client = new Redis(redis.url);
    });

    afterAll(async () => {
      // The client first: stopAll() stops this file's Redis too (startTestRedis tracks it).
      await closeClient(client);
      await stopAll();
      await redis?.stop();
    });

    const env = (prefix: string) => ({ REDIS_URL: redis.url, KEY_PREFIX: prefix, ADMIN_TOKEN, LOG_LEVEL: 'warn' });

    it('shows each of two instances on one Redis with its own share, summing to the total', async () => {
      const prefix = uniquePrefix('live-two');
      const [a, b] = await Promise.all([startApp({ env: env(prefix) }), startApp({ env: env(prefix) })]);
      apps.push(a, b);
      await startSale(a.url, 'shared', 300);
      const s = await openStream(b.url, 'shared');
      const { created, createdBy } = await burst([a.url, b.url], 'shared', 800, 40);
      expect(created).toBe(300);
      const last = await eventWhere(s, (e) => sum(e, 'CREATED') === 300 && allAnswers(e) === 800);
      s.close();
      expect(last.instances.map((i) => i.pid).sort()).toEqual([a.pid, b.pid].sort());
      const byPid = new Map(last.instances.map((i) => [i.pid, i]));
      expect(byPid.get(a.pid)!.answers.CREATED).toBe(createdBy.get(a.url));
      expect(byPid.get(b.pid)!.answers.CREATED).toBe(createdBy.get(b.url));
      expect(createdBy.get(a.url)).toBeGreaterThan(0);
      expect(createdBy.get(b.url)).toBeGreaterThan(0);
      expect(await client.xlen(new KeyLayout(prefix).product('shared').orders)).toBe(300);
      expect(last).toMatchObject({ stock: 0, sold: 300 });
    });

    it('on SIGTERM ends an open stream and exits 0 promptly', async () => {
      const prefix = uniquePrefix('live-term');
      const app = await startApp({ env: env(prefix) });
      await startSale(app.url, 'watched', 10);
      const s = await openStream(app.url, 'watched');
      await eventWhere(s, (e) => e.initialStock === 10);
      // An open stream that held the drain would be cut at SHUTDOWN_TIMEOUT_MS as a
      // request in progress, and the app would exit 1: 0 says it ended with the drain.
      const code = await app.stop();
      expect(code).toBe(0);
      await s.ended;
    });
  });
});
