import { setTimeout as sleep } from 'node:timers/promises';
import { ValidationPipe } from '@nestjs/common';
import { Redis } from 'ioredis';
import { queueVerdict } from '../bench/queue-load';
import { LiveFeed } from '../src/dashboard/live-feed';
import { DoorRefusals } from '../src/door/door-refusals';
import { WaitingRoom } from '../src/door/waiting-room';
import { FaultStop } from '../src/orders/fault-stop';
import { KeyLayout } from '../src/redis/key-layout';
import { request, startTestApp, TestApp } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

/**
 * The door: the sale window judged by Redis's clock, the waiting room and its passes,
 * and the refusals answered before the framework reads a request. Real redis-server,
 * real apps (two where the rule must hold across instances), real clocks.
 */
describe('the door', () => {
  let redis: TestRedis;
  let client: Redis;
  const open: TestApp[] = [];

  beforeAll(async () => {
    redis = await startTestRedis();
    client = new Redis(redis.url);
  }, 60_000);

  afterEach(async () => {
    await Promise.all(open.splice(0).map((a) => a.close()));
  });

  afterAll(async () => {
    await closeClient(client);
    await redis?.stop();
  });

  async function app(prefix: string, env: Record<string, string> = {}): Promise<TestApp> {
    const a = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: prefix, ...env });
    open.push(a);
    return a;
  }

  const put = (url: string, productId: string, body: Record<string, unknown>) =>
    request(url, 'PUT', `/api/products/${productId}`, { json: { discardOrders: true, ...body }, admin: true });
  const buy = (url: string, productId: string, userId: string, headers: Record<string, string> = {}) =>
    request(url, 'POST', '/api/orders', { json: { productId, userId }, headers });
  const join = (url: string, productId: string, userId: string) =>
    request(url, 'POST', `/api/products/${productId}/queue`, { json: { userId } });
  const ticket = (url: string, productId: string, t: string) =>
    request(url, 'GET', `/api/products/${productId}/queue/${t}`);
  /** A body that is not even JSON, which only the door answers (the route would say 400). */
  const notJson = (url: string, path: string) =>
    request(url, 'POST', path, { raw: '{not json', headers: { 'content-type': 'application/json' } });
  const redisNow = async () => {
    const [s, us] = await client.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };
  /** The ms time (Redis's clock) of every order in the product's log. */
  const orderTimes = async (prefix: string, productId: string) =>
    (await client.xrange(new KeyLayout(prefix).product(productId).orders, '-', '+')).map(([id]) =>
      Number(id.split('-')[0]),
    );

  describe('sale window', () => {
    it.each(['fenced', 'atomic', 'optimistic'])(
      '%s: before the start, 409 SALE_NOT_STARTED with Retry-After and startsAt, nothing written, even from an app whose clock runs 10 s ahead; at the start, sales open',
      async (strategy) => {
        const prefix = uniquePrefix(`window-${strategy}`);
        const ahead = await app(prefix, { LOCK_STRATEGY: strategy, FAULT_CLOCK_SKEW_MS: '10000', ALLOW_UNSAFE: '1' });
        const startsAt = (await redisNow()) + 2_500;
        const iso = new Date(startsAt).toISOString();
        const product = await put(ahead.url, 'w', { stock: 50, startsAt: iso });
        expect(product.body).toMatchObject({ startsAt: iso, endsAt: null });
        expect(Math.abs(Date.parse(product.body.serverTime as string) - (await redisNow()))).toBeLessThan(1_000);

        const early = await buy(ahead.url, 'w', 'u0');
        expect(early.status).toBe(409);
        expect(early.body).toMatchObject({ code: 'SALE_NOT_STARTED', startsAt: iso });
        expect(Number(early.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(Number(early.headers.get('retry-after'))).toBeLessThanOrEqual(3);
        // The product route, answered at the door once learnt: the same.
        const viaUrl = await request(ahead.url, 'POST', '/api/products/w/orders', { json: { userId: 'u0' } });
        expect(viaUrl.body).toMatchObject({ code: 'SALE_NOT_STARTED', startsAt: iso });
        expect(await client.get(new KeyLayout(prefix).product('w').stock)).toBe('50');
        expect(await orderTimes(prefix, 'w')).toEqual([]);
        // The dashboard's event carries the window and Redis's clock, for its countdown.
        const live = await ahead.app.get(LiveFeed).read('w');
        expect(live.window).toMatchObject({ startsAt, endsAt: null });
        expect(live.window!.redisNow).toBeLessThan(startsAt);

        // A herd arriving across the instant of the start, through both routes: every
        // order written is at or after the start by Redis's clock; the rest were refused.
        const herd: Promise<{ status: number; code?: string }>[] = [];
        while ((await redisNow()) < startsAt + 400) {
          for (let i = 0; i < 5; i++) {
            const user = `h${herd.length}`;
            herd.push(
              (herd.length % 2 === 0
                ? buy(ahead.url, 'w', user)
                : request(ahead.url, 'POST', '/api/products/w/orders', { json: { userId: user } })
              ).then((r) => ({ status: r.status, code: r.body.code as string | undefined })),
            );
          }
          await sleep(20);
        }
        const answers = await Promise.all(herd);
        const sold = answers.filter((a) => a.status === 201).length;
        const notStarted = answers.filter((a) => a.code === 'SALE_NOT_STARTED').length;
        expect(sold).toBeGreaterThan(0);
        expect(notStarted).toBeGreaterThan(0);
        expect(sold + notStarted + answers.filter((a) => a.code === 'SOLD_OUT').length).toBe(answers.length);
        const times = await orderTimes(prefix, 'w');
        expect(times).toHaveLength(sold);
        expect(Math.min(...times)).toBeGreaterThanOrEqual(startsAt);
        expect(Number(await client.get(new KeyLayout(prefix).product('w').stock))).toBe(50 - sold);
      },
      30_000,
    );

    it.each(['fenced', 'atomic'])(
      '%s with the naive check (SALE_CLOCK=app, the window by the app clock) sells early from an app whose clock runs ahead',
      async (strategy) => {
        const prefix = uniquePrefix(`naive-${strategy}`);
        const ahead = await app(prefix, {
          LOCK_STRATEGY: strategy,
          SALE_CLOCK: 'app',
          FAULT_CLOCK_SKEW_MS: '10000',
          ALLOW_UNSAFE: '1',
        });
        const startsAt = (await redisNow()) + 5_000;
        await put(ahead.url, 'n', { stock: 5, startsAt: new Date(startsAt).toISOString() });
        const early = await buy(ahead.url, 'n', 'u1');
        // The failure the lesson is about, really happening: an order 5 s before the start.
        expect(early.status).toBe(201);
        const [written] = await orderTimes(prefix, 'n');
        expect(written).toBeLessThan(startsAt - 4_000);
      },
    );

    it.each(['lock', 'fenced', 'reentrant', 'redlock', 'optimistic', 'none', 'setnx-then-expire'])(
      "%s: a purchase decided inside the window and written after its end sells nothing: the write judges the window by Redis's clock",
      async (strategy) => {
        const prefix = uniquePrefix(`late-${strategy}`);
        const lockNodes = strategy === 'redlock' ? await Promise.all([0, 1, 2].map(() => startTestRedis())) : [];
        try {
          const a = await app(prefix, {
            LOCK_STRATEGY: strategy,
            LOCK_TTL_MS: '10000',
            FAULT_STOP_AT: 'before-write:1',
            ALLOW_UNSAFE: '1',
            ...(lockNodes.length > 0 ? { REDLOCK_URLS: lockNodes.map((n) => n.url).join(',') } : {}),
          });
          const endsAt = (await redisNow()) + 1_500;
          // The hook (a real SIGSTOP in the fault suite) stops this very process here: its
          // thread sleeps instead, at the named point (the purchase decided, its write not
          // sent), until Redis's clock is past the end. Same host, same clock.
          let stoppedAt = 0;
          Object.assign(a.app.get(FaultStop), {
            stop: () => {
              stoppedAt = Date.now();
              Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, Math.max(0, endsAt - Date.now()) + 300);
            },
          });
          expect((await put(a.url, 'late', { stock: 5, endsAt: new Date(endsAt).toISOString() })).status).toBe(200);
          const late = await buy(a.url, 'late', 'u1');
          // It was decided inside the window (the read let it through), and refused at the write.
          expect(stoppedAt).toBeGreaterThan(0);
          expect(stoppedAt).toBeLessThan(endsAt);
          expect(late.body).toMatchObject({ statusCode: 409, code: 'SALE_ENDED' });
          expect(await orderTimes(prefix, 'late')).toEqual([]);
          expect(await client.get(new KeyLayout(prefix).product('late').stock)).toBe('5');
        } finally {
          await Promise.all(open.splice(0).map((o) => o.close()));
          await Promise.all(lockNodes.map((n) => n.stop()));
        }
      },
      30_000,
    );

    it('after the end, 409 SALE_ENDED; a window that is not one is 400 and changes nothing', async () => {
      const prefix = uniquePrefix('window-end');
      const { url } = await app(prefix);
      const endsAt = new Date((await redisNow()) + 1_200).toISOString();
      expect((await put(url, 'e', { stock: 5, endsAt })).status).toBe(200);
      expect((await buy(url, 'e', 'u1')).status).toBe(201);
      await sleep(1_400);
      const late = await buy(url, 'e', 'u2');
      expect(late.body).toMatchObject({ statusCode: 409, code: 'SALE_ENDED' });

      for (const body of [
        { stock: 1, startsAt: '2026-11-27T10:00:00' },
        { stock: 1, startsAt: '2026-02-30T10:00:00Z' },
        { stock: 1, startsAt: '2026-11-27T10:00:00Z', endsAt: '2026-11-27T09:00:00+00:00' },
        { stock: 1, queue: { admitPerSecond: 0 } },
        { stock: 1, queue: [] },
      ]) {
        const refused = await put(url, 'e', body);
        expect({ body, status: refused.status, code: refused.body.code }).toEqual({
          body,
          status: 400,
          code: 'VALIDATION_FAILED',
        });
      }
      // The sale is the one before: its order is still there.
      expect((await request(url, 'GET', '/api/products/e')).body).toMatchObject({ orders: 1, stock: 4 });
    });
  });

  describe('waiting room', () => {
    it('admits in the order buyers joined across two instances, never more passes than stock, and each pass buys once', async () => {
      const prefix = uniquePrefix('queue');
      const [a, b] = [await app(prefix), await app(prefix)];
      expect((await put(a.url, 'q', { stock: 3, queue: { admitPerSecond: 1000, passTtlMs: 60_000 } })).status).toBe(
        200,
      );
      // A queued product sells only with a pass.
      expect((await buy(a.url, 'q', 'u0')).body).toMatchObject({ statusCode: 403, code: 'ADMISSION_REQUIRED' });

      const tickets: string[] = [];
      for (let i = 0; i < 6; i++) {
        const joined = await join(i % 2 ? b.url : a.url, 'q', `u${i}`);
        expect(joined.status).toBe(202);
        tickets.push(joined.body.ticket as string);
      }
      // Joining again answers the same ticket.
      expect((await join(b.url, 'q', 'u0')).body.ticket).toBe(tickets[0]);
      const states = await Promise.all(tickets.map((t, i) => ticket(i % 2 ? a.url : b.url, 'q', t)));
      // Stock 3: the first three joined are admitted, the rest wait in order.
      expect(states.map((s) => [s.body.state, s.body.position])).toEqual([
        ['admitted', 0],
        ['admitted', 0],
        ['admitted', 0],
        ['waiting', 1],
        ['waiting', 2],
        ['waiting', 3],
      ]);
      expect(states[3].headers.get('retry-after')).toBe('1');
      const passes = states.slice(0, 3).map((s) => s.body.pass as string);

      // Another buyer's pass, a forged one: refused, nothing written.
      expect((await buy(a.url, 'q', 'u1', { 'admission-pass': passes[0] })).body.code).toBe('ADMISSION_INVALID');
      expect((await buy(a.url, 'q', 'u1', { 'admission-pass': 'A'.repeat(22) })).body.code).toBe('ADMISSION_INVALID');
      // One pass sent twice at once, to two instances: one order.
      const twice = await Promise.all([
        buy(a.url, 'q', 'u0', { 'admission-pass': passes[0] }),
        buy(b.url, 'q', 'u0', { 'admission-pass': passes[0] }),
      ]);
      const made = twice.filter((r) => r.status === 201);
      expect(made.length).toBeGreaterThanOrEqual(1);
      expect(new Set(made.map((r) => r.body.orderId)).size).toBe(1);
      for (const r of twice) if (r.status !== 201) expect(r.body.code).toBe('IDEMPOTENCY_KEY_IN_USE');
      // A retry with the pass is answered the same order; the ticket reads used.
      const again = await buy(b.url, 'q', 'u0', { 'admission-pass': passes[0] });
      expect(again.status).toBe(201);
      expect(again.body.orderId).toBe(made[0].body.orderId);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect((await ticket(a.url, 'q', tickets[0])).body.state).toBe('used');
      expect(await orderTimes(prefix, 'q')).toHaveLength(1);

      // The two other passes buy; the product is sold out and every ticket says so.
      for (const i of [1, 2])
        expect((await buy(a.url, 'q', `u${i}`, { 'admission-pass': passes[i] })).status).toBe(201);
      const after = await Promise.all(tickets.slice(3).map((t) => ticket(b.url, 'q', t)));
      expect(after.map((s) => s.body.state)).toEqual(['sold_out', 'sold_out', 'sold_out']);
      expect(await orderTimes(prefix, 'q')).toHaveLength(3);
      expect((await ticket(a.url, 'q', 'A'.repeat(22))).body.code).toBe('UNKNOWN_TICKET');
      expect((await join(a.url, 'nothing', 'u1')).body.code).toBe('UNKNOWN_PRODUCT');
    }, 30_000);

    it("tickets are answered from the route's hook, without Nest's pipeline; a refusal goes to the route, and Redis is asked once", async () => {
      const prefix = uniquePrefix('queue-once');
      const a = await app(prefix);
      expect((await put(a.url, 'plain', { stock: 3 })).status).toBe(200);
      expect((await put(a.url, 'q', { stock: 3, queue: { admitPerSecond: 10 } })).status).toBe(200);
      // Nest's pipe runs for every request its handler serves (the route's parameters).
      const pipe = jest.spyOn(ValidationPipe.prototype, 'transform');
      const monitor = await client.monitor();
      const scripts: string[] = [];
      const marker = `${prefix}-end`;
      let seenMarker: () => void = () => undefined;
      const markerSeen = new Promise<void>((resolve) => (seenMarker = resolve));
      // EVALSHA sha 5 KEYS[1..5] op ...: queue-5.lua's runs on this test's keys only (the
      // dashboard's own script runs on a timer).
      monitor.on('monitor', (_time: string, args: string[]) => {
        if (args[0]?.toLowerCase() === 'echo' && args[1] === marker) seenMarker();
        if (
          args[0]?.toLowerCase() === 'evalsha' &&
          args[3]?.startsWith(prefix) &&
          (args[8] === 'join' || args[8] === 'read')
        ) {
          scripts.push(`${args[8]} ${args[3]}`);
        }
      });
      try {
        // A ticket, as the route answers it (Retry-After while waiting), and no pipe run.
        for (let i = 0; i < 12; i++) expect((await join(a.url, 'q', `w${i}`)).status).toBe(202);
        const waiting = await join(a.url, 'q', 'w12');
        expect(waiting.status).toBe(202);
        expect(Object.keys(waiting.body).sort()).toEqual(['position', 'state', 'ticket']);
        expect(waiting.body.state).toBe('waiting');
        expect(Number(waiting.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        const read = await ticket(a.url, 'q', waiting.body.ticket as string);
        expect([read.status, read.body.state]).toEqual([200, 'waiting']);
        expect(pipe).not.toHaveBeenCalled();

        const refusals = [
          await join(a.url, 'nothing', 'u1'),
          await join(a.url, 'plain', 'u1'),
          await ticket(a.url, 'q', 'A'.repeat(22)),
        ];
        expect(refusals.map((r) => [r.status, r.body.code])).toEqual([
          [404, 'UNKNOWN_PRODUCT'],
          [409, 'NO_QUEUE'],
          [404, 'UNKNOWN_TICKET'],
        ]);
        // Each answered by the route (its pipe ran), with the refusal its hook got.
        expect(pipe).toHaveBeenCalled();
        // MONITOR's lines arrive in the order Redis ran the commands: a marker after them all.
        await client.echo(marker);
        await markerSeen;
      } finally {
        pipe.mockRestore();
        monitor.disconnect();
      }
      // One script per request: a refusal is not asked for again by the route.
      const meta = (id: string) => `${prefix}{p:${id}}:meta`;
      expect(scripts).toEqual([
        ...Array.from({ length: 13 }, () => `join ${meta('q')}`),
        `read ${meta('q')}`,
        `join ${meta('nothing')}`,
        `join ${meta('plain')}`,
        `read ${meta('q')}`,
      ]);
    }, 30_000);

    it('a join that failed with nothing to show for it is answered once, as a 500, and not joined again by the route', async () => {
      const a = await app(uniquePrefix('queue-nothing-thrown'));
      expect((await put(a.url, 'q', { stock: 3, queue: { admitPerSecond: 10 } })).status).toBe(200);
      // A rejection without a reason: the route must still see that its hook tried.
      const joined = jest.spyOn(WaitingRoom.prototype, 'join').mockRejectedValueOnce(undefined);
      try {
        const res = await join(a.url, 'q', 'u1');
        expect([res.status, res.body.code]).toEqual([500, 'INTERNAL_ERROR']);
        expect(joined).toHaveBeenCalledTimes(1);
      } finally {
        joined.mockRestore();
      }
    }, 30_000);

    it('admits nobody before the start (a pass would lapse before it could buy): the herd waits, Retry-After counting the opening, and the first go in at the start', async () => {
      const prefix = uniquePrefix('queue-start');
      const a = await app(prefix);
      const startsAt = (await redisNow()) + 5_000;
      const iso = new Date(startsAt).toISOString();
      expect((await put(a.url, 'q', { stock: 100, startsAt: iso, queue: { admitPerSecond: 10 } })).status).toBe(200);
      const before = await redisNow();
      const joins = [await join(a.url, 'q', 'u0')];
      const after = await redisNow();
      for (let i = 1; i < 25; i++) joins.push(await join(a.url, 'q', `u${i}`));
      expect(joins.map((j) => j.status)).toEqual(Array.from({ length: 25 }, () => 202));
      expect(joins[0].body).toMatchObject({ state: 'waiting', position: 1 });
      expect(joins[0].body.pass).toBeUndefined();
      // The wait for the opening, then the place's own (0.1 s at 10/s), rounded up: as
      // seen from some instant of the join.
      const retryAfter = Number(joins[0].headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(Math.ceil((startsAt - after + 100) / 1000));
      expect(retryAfter).toBeLessThanOrEqual(Math.ceil((startsAt - before + 100) / 1000));
      expect((await ticket(a.url, 'q', joins[0].body.ticket as string)).body.state).toBe('waiting');
      const admitted = new KeyLayout(prefix).product('q').admitted;
      expect(await client.zcard(admitted)).toBe(0);
      await sleep(Math.max(0, startsAt - (await redisNow())) + 50);
      // At the start the first second's buyers go in at once (the bucket filled while the
      // sale was closed, up to one second of the rate), in the order they joined.
      const states = await Promise.all(joins.map((j) => ticket(a.url, 'q', j.body.ticket as string)));
      expect(states.slice(0, 10).map((s) => s.body.state)).toEqual(Array.from({ length: 10 }, () => 'admitted'));
      expect(states[24].body.state).toBe('waiting');
      expect(await client.zcard(admitted)).toBeLessThanOrEqual(12);
      const bought = await buy(a.url, 'q', 'u0', { 'admission-pass': states[0].body.pass as string });
      expect(bought.status).toBe(201);
    }, 30_000);

    it('admits nobody after the end: every ticket but a used one reads ended, and a join without a ticket is SALE_ENDED, enrolling no one', async () => {
      const prefix = uniquePrefix('queue-end');
      const a = await app(prefix);
      const k = new KeyLayout(prefix).product('q');
      const endsAt = (await redisNow()) + 2_000;
      const iso = new Date(endsAt).toISOString();
      expect((await put(a.url, 'q', { stock: 100, endsAt: iso, queue: { admitPerSecond: 1 } })).status).toBe(200);
      // The bucket starts with one second of the rate: u0 goes in, the others wait (or, on
      // a slow machine, one more goes in a second later).
      const joins = [await join(a.url, 'q', 'u0'), await join(a.url, 'q', 'u1'), await join(a.url, 'q', 'u2')];
      expect(joins.map((j) => j.status)).toEqual([202, 202, 202]);
      expect(joins[0].body.state).toBe('admitted');
      expect((await buy(a.url, 'q', 'u0', { 'admission-pass': joins[0].body.pass as string })).status).toBe(201);
      await sleep(Math.max(0, endsAt - (await redisNow())) + 1_100);
      const admittedAtEnd = await client.hget(k.meta, 'queueAdmitted');
      // A second and more after the end: the bucket has refilled, and still nobody goes in.
      const states = await Promise.all(joins.map((j) => ticket(a.url, 'q', j.body.ticket as string)));
      expect(states.map((t) => [t.status, t.body.state])).toEqual([
        [200, 'used'],
        [200, 'ended'],
        [200, 'ended'],
      ]);
      expect(states[1].headers.get('retry-after')).toBeNull();
      expect(await client.hget(k.meta, 'queueAdmitted')).toBe(admittedAtEnd);
      const late = await join(a.url, 'q', 'u3');
      // The door learnt it: a join that is not even JSON (which the route would answer 400)
      // hears SALE_ENDED before its body is read.
      const atDoor = await notJson(a.url, '/api/products/q/queue');
      expect(late.status).toBe(409);
      expect(late.body).toMatchObject({ code: 'SALE_ENDED' });
      expect([atDoor.status, atDoor.body]).toEqual([409, late.body]);
      expect(await client.hget(k.queue, 'u:u3')).toBeNull();
      expect(await client.hget(k.meta, 'queueJoined')).toBe('3');
    }, 30_000);

    it("a retry of a pass's purchase takes the pass off the count too (the first one's removal may have been lost)", async () => {
      const prefix = uniquePrefix('queue-replay');
      const a = await app(prefix);
      const admitted = new KeyLayout(prefix).product('q').admitted;
      expect((await put(a.url, 'q', { stock: 3, queue: { admitPerSecond: 100 } })).status).toBe(200);
      const joined = await join(a.url, 'q', 'u0');
      const pass = joined.body.pass as string;
      expect((await buy(a.url, 'q', 'u0', { 'admission-pass': pass })).status).toBe(201);
      // The first purchase's removal lost (its answer or its process went down after the
      // write): the pass still counts as outstanding.
      await sleep(100);
      await client.zadd(admitted, Date.now() + 60_000, pass);
      const retry = await buy(a.url, 'q', 'u0', { 'admission-pass': pass });
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      await sleep(100);
      expect(await client.zscore(admitted, pass)).toBeNull();
    }, 30_000);

    it('a pass that expires unused lets the next in line in, and buys nothing itself', async () => {
      const prefix = uniquePrefix('queue-expiry');
      const { url } = await app(prefix);
      await put(url, 'x', { stock: 1, queue: { admitPerSecond: 100, passTtlMs: 1_000 } });
      const first = await join(url, 'x', 'u1');
      const second = await join(url, 'x', 'u2');
      expect(first.body).toMatchObject({ state: 'admitted' });
      expect(second.body).toMatchObject({ state: 'waiting', position: 1 });
      await sleep(1_100);
      expect((await ticket(url, 'x', first.body.ticket as string)).body.state).toBe('expired');
      const next = await ticket(url, 'x', second.body.ticket as string);
      expect(next.body.state).toBe('admitted');
      const late = await buy(url, 'x', 'u1', { 'admission-pass': first.body.pass as string });
      expect(late.body).toMatchObject({ statusCode: 403, code: 'ADMISSION_INVALID' });
      expect((await buy(url, 'x', 'u2', { 'admission-pass': next.body.pass as string })).status).toBe(201);
      expect(await orderTimes(prefix, 'x')).toHaveLength(1);
    }, 30_000);

    it('a pass that lapses while its purchase waits for the lock buys nothing: the write checks it by Redis time', async () => {
      const prefix = uniquePrefix('queue-lapse');
      const { url } = await app(prefix, { LOCK_STRATEGY: 'fenced' });
      await put(url, 'l', { stock: 2, queue: { admitPerSecond: 100, passTtlMs: 1_000 } });
      const admitted = await join(url, 'l', 'u1');
      expect(admitted.body.state).toBe('admitted');
      // Someone else holds the product's lock past the pass's expiry: the purchase waits for it.
      const k = new KeyLayout(prefix).product('l');
      await client.set(k.lock, 'someone-else', 'PX', 2_000);
      const late = await buy(url, 'l', 'u1', { 'admission-pass': admitted.body.pass as string });
      expect(late.body).toMatchObject({ statusCode: 403, code: 'ADMISSION_INVALID' });
      expect(late.body.message).toMatch(/expired/);
      expect(await orderTimes(prefix, 'l')).toEqual([]);
      expect(await client.get(k.stock)).toBe('2');
    }, 30_000);

    it('admits no more passes than the stock left can serve in full (a pass may buy up to the limit)', async () => {
      const prefix = uniquePrefix('queue-units');
      const { url } = await app(prefix);
      await put(url, 'm', { stock: 5, perUserLimit: 2, queue: { admitPerSecond: 100 } });
      const states = [];
      for (let i = 0; i < 4; i++) states.push((await join(url, 'm', `u${i}`)).body.state);
      // floor(5 / 2) = 2 passes: each can buy its 2 units.
      expect(states).toEqual(['admitted', 'admitted', 'waiting', 'waiting']);
    });

    it('a remainder below the per-user limit gets one pass of its own: the last units sell, no ticket waits forever', async () => {
      const prefix = uniquePrefix('queue-remainder');
      const { url } = await app(prefix);
      await put(url, 'rm', { stock: 3, perUserLimit: 2, queue: { admitPerSecond: 100 } });
      const first = await join(url, 'rm', 'u0');
      const second = await join(url, 'rm', 'u1');
      expect([first.body.state, second.body.state]).toEqual(['admitted', 'waiting']);
      const bought = await request(url, 'POST', '/api/orders', {
        json: { productId: 'rm', userId: 'u0', quantity: 2 },
        headers: { 'admission-pass': first.body.pass as string },
      });
      expect(bought.status).toBe(201);
      // One unit left, fewer than the limit: u1 is admitted for it, and buys it.
      const next = await ticket(url, 'rm', second.body.ticket as string);
      expect(next.body.state).toBe('admitted');
      expect((await buy(url, 'rm', 'u1', { 'admission-pass': next.body.pass as string })).status).toBe(201);
      expect(await client.get(new KeyLayout(prefix).product('rm').stock)).toBe('0');
    });

    it('admits at the sale rate', async () => {
      const prefix = uniquePrefix('queue-rate');
      const { url } = await app(prefix);
      await put(url, 'r', { stock: 100, queue: { admitPerSecond: 2 } });
      const joined = [];
      for (let i = 0; i < 6; i++) joined.push((await join(url, 'r', `u${i}`)).body);
      // The bucket starts with one second of admissions: two now, the rest wait.
      expect(joined.map((j) => j.state)).toEqual(['admitted', 'admitted', 'waiting', 'waiting', 'waiting', 'waiting']);
      await sleep(1_100);
      const states = await Promise.all(joined.map((j) => ticket(url, 'r', j.ticket as string)));
      expect(states.map((s) => s.body.state)).toEqual([
        'admitted',
        'admitted',
        'admitted',
        'admitted',
        'waiting',
        'waiting',
      ]);
    }, 30_000);
  });

  describe("the bench's queue verdict (bench/queue-load.ts), read from Redis", () => {
    it('holds for orders of admitted buyers, and names an order of a buyer never admitted and passes beyond the stock', async () => {
      const k = new KeyLayout(uniquePrefix('queue-verdict')).product('v');
      await client.hset(k.meta, 'queueAdmitted', '1');
      await client.hset(k.queue, 'u:a', 'ta', 't:ta', '1|a|pa', 'u:b', 'tb', 't:tb', '2|b|pb');
      await client.set(k.stock, '1');
      expect(await queueVerdict(client, k, [{ userId: 'a' }], 1)).toBeNull();
      // b waited at place 2 and was never admitted; c never joined at all.
      expect(await queueVerdict(client, k, [{ userId: 'a' }, { userId: 'b' }, { userId: 'c' }], 1)).toBe(
        'queue: 2 buyers with orders were never admitted (e.g. b, c)',
      );
      const later = (await redisNow()) + 60_000;
      await client.zadd(k.admitted, later, 'p1', later, 'p2');
      expect(await queueVerdict(client, k, [{ userId: 'a' }], 1)).toBe(
        'queue: 2 passes outstanding for 1 units left (limit 1 each)',
      );
      // A pass whose purchase was written is spent, even if it was never taken off the set.
      await client.hset(k.idem, 'pass p1', 'D|o1');
      expect(await queueVerdict(client, k, [{ userId: 'a' }], 1)).toBeNull();
      // Over buckets: the last unit sold to p2's buyer, homed in bucket 1, whose outcome is
      // that bucket's (its mark `y:p2` in bucket 0 lost): spent too.
      const k1 = new KeyLayout(uniquePrefix('queue-verdict')).product('v~1');
      await client.set(k.stock, '0');
      await client.set(k1.stock, '0');
      expect(await queueVerdict(client, k, [{ userId: 'a' }], 1, [k, k1])).toBe(
        'queue: 1 passes outstanding for 0 units left (limit 1 each)',
      );
      await client.hset(k1.idem, 'pass p2', 'D|o2');
      expect(await queueVerdict(client, k, [{ userId: 'a' }], 1, [k, k1])).toBeNull();
    });
  });

  describe('refusals at the door', () => {
    it('answers a sold-out product from its URL before reading the body, lets keyed retries through, and sees returned units again', async () => {
      const prefix = uniquePrefix('door');
      const a = await app(prefix);
      const door = a.app.get(DoorRefusals);
      await put(a.url, 'd', { stock: 1, paymentTimeoutMs: 60_000 });
      const order = await request(a.url, 'POST', '/api/products/d/orders', {
        json: { userId: 'u1' },
        headers: { 'idempotency-key': 'k-1' },
      });
      expect(order.status).toBe(201);
      // Learnt from Redis's SOLD_OUT through the normal path...
      const first = await request(a.url, 'POST', '/api/products/d/orders', { json: { userId: 'u2' } });
      expect(first.body.code).toBe('SOLD_OUT');
      expect(door.answered).toBe(0);
      // ...then answered at the door: a body that is not even JSON gets the 409, not a 400.
      const atDoor = await notJson(a.url, '/api/products/d/orders');
      expect(atDoor.status).toBe(409);
      expect(atDoor.body).toEqual(first.body);
      expect(door.answered).toBe(1);
      // A retry with its key (its first answer lost) is answered its own order, never the door's SOLD_OUT.
      const keyed = await request(a.url, 'POST', '/api/products/d/orders', {
        json: { userId: 'u1' },
        headers: { 'idempotency-key': 'k-1' },
      });
      expect(keyed.status).toBe(201);
      expect(keyed.body.orderId).toBe(order.body.orderId);
      expect(door.answered).toBe(1);
      // The unit comes back (cancelled): within the door's trust, it is sold again.
      expect((await request(a.url, 'POST', `/api/orders/${order.body.orderId}/cancel`)).status).toBe(200);
      await sleep(300);
      const resold = await request(a.url, 'POST', '/api/products/d/orders', { json: { userId: 'u3' } });
      expect(resold.status).toBe(201);
    });

    it('a join after the sell-out enrols no one: SOLD_OUT from the script, then from the door; a ticket held reads sold_out', async () => {
      const prefix = uniquePrefix('door-join');
      const a = await app(prefix);
      const door = a.app.get(DoorRefusals);
      const k = new KeyLayout(prefix).product('j');
      await put(a.url, 'j', { stock: 1, queue: { admitPerSecond: 100 } });
      const first = await join(a.url, 'j', 'u1');
      const waiting = await join(a.url, 'j', 'u2');
      expect(waiting.body.state).toBe('waiting');
      expect((await buy(a.url, 'j', 'u1', { 'admission-pass': first.body.pass as string })).status).toBe(201);
      const enrolled = await client.hlen(k.queue);
      // Redis refuses the newcomer and writes nothing...
      const late = await join(a.url, 'j', 'u3');
      expect(late.status).toBe(409);
      expect(late.body).toMatchObject({ code: 'SOLD_OUT' });
      expect(door.answered).toBe(0);
      // ...then the door repeats it before reading the body.
      const atDoor = await notJson(a.url, '/api/products/j/queue');
      expect(atDoor.status).toBe(409);
      expect(atDoor.body).toEqual(late.body);
      expect(door.answered).toBe(1);
      expect(await client.hlen(k.queue)).toBe(enrolled);
      expect(await client.hget(k.meta, 'queueJoined')).toBe('2');
      // The buyer who joined in time reads their ticket: sold out. Joining again meanwhile
      // is answered at the door, which knows no buyer: SOLD_OUT too (documented).
      expect((await ticket(a.url, 'j', waiting.body.ticket as string)).body.state).toBe('sold_out');
      expect((await join(a.url, 'j', 'u2')).body.code).toBe('SOLD_OUT');
      expect(door.answered).toBe(2);
    });

    it('a product without a waiting room, sold out by a purchase, still answers a join NO_QUEUE (the door learns joins from joins)', async () => {
      const a = await app(uniquePrefix('door-no-queue'));
      const door = a.app.get(DoorRefusals);
      await put(a.url, 'n', { stock: 1 });
      expect((await buy(a.url, 'n', 'u1')).status).toBe(201);
      expect((await request(a.url, 'POST', '/api/products/n/orders', { json: { userId: 'u2' } })).body.code).toBe(
        'SOLD_OUT',
      );
      for (let i = 0; i < 2; i++) expect((await join(a.url, 'n', `u${i}`)).body.code).toBe('NO_QUEUE');
      expect(door.answered).toBe(0);
    });
  });
});
