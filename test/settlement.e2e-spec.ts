import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { Client } from 'pg';
import { APP_CWD } from '../harness/paths';
import { startPrivatePostgres } from '../harness/postgres';
import { processState, startApp } from '../harness/processes';
import { checkSettled, unsettled, waitForSettlement } from '../bench/settled';
import { KeyLayout } from '../src/redis/key-layout';
import { MARK_TAGS, markWritten } from '../src/redis/shard-marks';
import { migrate, migrations } from '../src/settlement/migrations';
import { createPool } from '../src/settlement/postgres';
import { SETTLE_GROUP, Settler } from '../src/settlement/settler';
import { ADMIN_TOKEN, pay, request, startTestApp, TestApp } from './helpers/app';
import { TestRedis, uniquePrefix, until } from './helpers/redis';
import { useRedisAndPostgres } from './helpers/stack';

/**
 * Orders outlive Redis: the reservation's afterlife (pay, cancel, expiry at the
 * payment deadline, units back to stock exactly once) and settlement into a real
 * PostgreSQL through the consumer group, exactly once, through a settler killed
 * after COMMIT and before XACK, and before COMMIT. Real redis-server and PostgreSQL
 * processes; the kills land at named stop points (FAULT_STOP_AT), never by timing.
 */
describe('orders settled into PostgreSQL, units given back once', () => {
  const stack = useRedisAndPostgres('settle_test');
  const { database } = stack;
  let redis: TestRedis;
  let client: Redis;
  beforeAll(() => {
    ({ redis, client } = stack);
  });

  async function app(prefix: string, databaseUrl: string, env: Record<string, string> = {}): Promise<TestApp> {
    return stack.opened(
      await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: prefix, DATABASE_URL: databaseUrl, ...env }),
    );
  }

  const sale = (url: string, productId: string, stock: number, paymentTimeoutMs: number) =>
    request(url, 'PUT', `/api/products/${productId}`, {
      json: { stock, paymentTimeoutMs, discardOrders: true },
      admin: true,
    });

  async function buy(url: string, productId: string, userId: string): Promise<string> {
    const res = await request(url, 'POST', '/api/orders', { json: { productId, userId } });
    expect(res.status).toBe(201);
    return res.body.orderId as string;
  }

  it('pays, cancels and expires reservations, each once, gives their units back to be sold again, and settles all of it', async () => {
    const prefix = uniquePrefix('afterlife');
    const keys = new KeyLayout(prefix);
    const k = keys.product('phone');
    const db = await database();
    const { url } = await app(prefix, db, { EXPIRY_SWEEP_MS: '50' });
    expect((await sale(url, 'phone', 6, 1500)).status).toBe(200);
    const ids = [];
    for (const user of ['u1', 'u2', 'u3', 'u4', 'u5', 'u6']) ids.push(await buy(url, 'phone', user));
    expect(ids[0]).toMatch(/^phone\.[0-9a-f-]{36}$/);

    const reserved = await request(url, 'GET', `/api/orders/${ids[0]}`);
    expect(reserved.body).toMatchObject({ status: 'reserved', userId: 'u1', quantity: 1, paymentId: null });
    expect(Date.parse(reserved.body.payBy as string)).toBeGreaterThan(Date.now());

    // Paid, and the provider's retried callback answered the same; another payment is refused.
    const paid = (id: string, paymentId: string) => pay(url, id, paymentId);
    expect((await paid(ids[0], 'p-1')).body).toMatchObject({ status: 'paid', paymentId: 'p-1', payBy: null });
    expect((await paid(ids[0], 'p-1')).status).toBe(200);
    expect((await paid(ids[0], 'p-other')).body).toMatchObject({ statusCode: 409, code: 'ORDER_PAID' });
    expect((await paid(ids[1], 'p-2')).status).toBe(200);
    // Cancelled (twice: the same answer), and a cancelled order is not paid; a paid one is not cancelled.
    const cancel = (id: string) => request(url, 'POST', `/api/orders/${id}/cancel`);
    expect((await cancel(ids[2])).body).toMatchObject({ status: 'cancelled' });
    expect((await cancel(ids[2])).status).toBe(200);
    expect((await paid(ids[2], 'p-3')).body).toMatchObject({ statusCode: 409, code: 'ORDER_CANCELLED' });
    expect((await cancel(ids[0])).body).toMatchObject({ statusCode: 409, code: 'ORDER_PAID' });
    expect((await cancel(ids[3])).status).toBe(200);
    // The per-user count went down with the unit: u3 may buy again.
    expect(await client.hget(k.buyers, 'u3')).toBeNull();
    expect(await client.get(k.stock)).toBe('2');

    // u5 and u6 never pay: the sweeper expires them at the deadline, by Redis's clock.
    for (const id of [ids[4], ids[5]]) {
      for (let i = 0; (await request(url, 'GET', `/api/orders/${id}`)).body.status !== 'expired'; i++) {
        expect(i).toBeLessThan(100);
        await sleep(50);
      }
    }
    expect((await paid(ids[4], 'p-late')).body).toMatchObject({ statusCode: 409, code: 'ORDER_EXPIRED' });
    expect(await client.get(k.stock)).toBe('4');
    expect(await client.zcard(k.deadlines)).toBe(0);

    // The four returned units sell again, to u3 again and to new buyers; then it is sold out.
    // Their reservations get a minute to be paid (the sale's timeout raised in its meta,
    // which each write reads), so none expires while the test reads what was settled,
    // however slow the machine.
    await client.hset(k.meta, 'paymentTimeoutMs', 60_000);
    for (const user of ['u3', 'u7', 'u8', 'u9']) await buy(url, 'phone', user);
    const soldOut = await request(url, 'POST', '/api/orders', { json: { productId: 'phone', userId: 'u10' } });
    expect(soldOut.body.code).toBe('SOLD_OUT');

    // Unknown orders, and ids that are not ours.
    expect((await request(url, 'GET', '/api/orders/phone.00000000-0000-4000-8000-000000000000')).body.code).toBe(
      'UNKNOWN_ORDER',
    );
    expect((await request(url, 'GET', '/api/orders/not-an-order')).body.code).toBe('VALIDATION_FAILED');
    expect((await paid(ids[0], 'bad|id')).body.code).toBe('VALIDATION_FAILED');

    // Settled: every order once, with the status Redis has; each event once.
    expect(await waitForSettlement(client, k, 20_000)).not.toBeNull();
    const check = await checkSettled(db, client, k, 'phone');
    expect(check).toMatchObject({ ok: true, rows: 10 });
    expect(check.byStatus).toEqual({ paid: 2, cancelled: 2, expired: 2, reserved: 4 });
    // What /health and /metrics say once it has caught up.
    await sleep(1_100); // /health looks at most once a second
    expect((await request(url, 'GET', '/health')).body.settlement).toEqual({
      database: 'up',
      state: 'settling',
      unsettled: 0,
      oldestMs: 0,
    });
    const metrics = await fetch(`${url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/^seckill_settlement_unsettled 0$/m);
    expect(metrics).toMatch(/^seckill_settlement_oldest_seconds 0$/m);
    // And the dashboard's live event.
    const live = await fetch(`${url}/api/live/phone`);
    const reader = live.body!.getReader();
    let text = '';
    while (!/\n\n/.test(text)) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    expect(JSON.parse(/data: (.*)/.exec(text)![1]).settlement).toEqual({ unsettled: 0, oldestMs: 0 });
    const pgc = new Client({ connectionString: db });
    await pgc.connect();
    try {
      const { rows } = await pgc.query(
        'SELECT event, count(*)::int AS n FROM order_events WHERE product_id = $1 GROUP BY 1 ORDER BY 1',
        ['phone'],
      );
      expect(rows).toEqual([
        { event: 'cancelled', n: 2 },
        { event: 'created', n: 10 },
        { event: 'expired', n: 2 },
        { event: 'paid', n: 2 },
      ]);
      const { rows: migrated } = await pgc.query('SELECT version FROM schema_migrations ORDER BY version');
      expect(migrated).toEqual([{ version: 1 }, { version: 2 }, { version: 3 }]);
      // Migration 3: every event the settler wrote has the time it reached PostgreSQL.
      const { rows: untimed } = await pgc.query(
        'SELECT count(*)::int AS n FROM order_events WHERE product_id = $1 AND settled_at IS NULL',
        ['phone'],
      );
      expect(untimed).toEqual([{ n: 0 }]);
    } finally {
      await pgc.end();
    }
  }, 60_000);

  it('an upgrade: the orders and reservations a version before the shard marks left are marked as an instance starts, then settled and expired', async () => {
    const prefix = uniquePrefix('upgrade');
    const keys = new KeyLayout(prefix);
    const k = keys.product('phone');
    // Sold by an instance that does not settle; then what an older version would not have
    // written: the shards' marks.
    const seller = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: prefix, EXPIRY_SWEEP_MS: '60000' });
    stack.opened(seller);
    await sale(seller.url, 'phone', 3, 1000);
    const ids = [await buy(seller.url, 'phone', 'o1'), await buy(seller.url, 'phone', 'o2')];
    await seller.close();
    await client.del(keys.marks(MARK_TAGS[0]).settle, keys.marks(MARK_TAGS[0]).due);
    const db = await database();
    const { url } = await app(prefix, db, { EXPIRY_SWEEP_MS: '50' });
    for (let i = 0; (await client.zcard(k.deadlines)) > 0; i++) {
      expect(i).toBeLessThan(100);
      await sleep(50);
    }
    expect(await client.get(k.stock)).toBe('3');
    expect(await waitForSettlement(client, k, 20_000)).not.toBeNull();
    expect(await checkSettled(db, client, k, 'phone')).toMatchObject({ ok: true, rows: 2 });
    expect((await request(url, 'GET', `/api/orders/${ids[1]}`)).body.status).toBe('expired');
  }, 30_000);

  it('a restart never discards what PostgreSQL has not got, nor an order still waiting for its payment', async () => {
    const prefix = uniquePrefix('restart');
    const k = new KeyLayout(prefix).product('phone');
    // An instance that sells and does not settle: the settle group is made by hand, as a
    // settler that has not caught up would leave it.
    const seller = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: prefix, EXPIRY_SWEEP_MS: '60000' });
    stack.opened(seller);
    await sale(seller.url, 'phone', 3, 1000);
    const id = await buy(seller.url, 'phone', 'r1');
    await client.xgroup('CREATE', k.orders, 'settle', '0');
    const notSettled = await sale(seller.url, 'phone', 3, 1000);
    expect(notSettled.body).toMatchObject({ statusCode: 409, code: 'SALE_NOT_SETTLED' });
    // Settled (read and acknowledged) but still reserved: refused too, until it is final.
    const [[, entries]] = (await client.xreadgroup('GROUP', 'settle', 'c', 'STREAMS', k.orders, '>')) as [
      string,
      [string, string[]][],
    ][];
    await client.xack(k.orders, 'settle', ...entries.map(([entryId]) => entryId));
    expect((await sale(seller.url, 'phone', 3, 1000)).body).toMatchObject({ code: 'SALE_HAS_RESERVATIONS' });
    expect(await client.hget(k.states, id)).toMatch(/^R\|/);
    // Cancelled, and its event settled: now the restart may go.
    expect((await request(seller.url, 'POST', `/api/orders/${id}/cancel`)).status).toBe(200);
    expect((await sale(seller.url, 'phone', 3, 1000)).body.code).toBe('SALE_NOT_SETTLED');
    const [[, more]] = (await client.xreadgroup('GROUP', 'settle', 'c', 'STREAMS', k.orders, '>')) as [
      string,
      [string, string[]][],
    ][];
    await client.xack(k.orders, 'settle', ...more.map(([entryId]) => entryId));
    expect((await sale(seller.url, 'phone', 3, 1000)).status).toBe(200);
  }, 30_000);

  it('the settle group is made with the sale: a restart refuses while PostgreSQL lacks an order, even one bought while PostgreSQL was down at start-up, paid or not', async () => {
    const prefix = uniquePrefix('down-at-boot');
    const k = new KeyLayout(prefix).product('phone');
    // PostgreSQL unreachable from the start: no settler ever ran, so none made the group.
    const { url } = await app(prefix, 'postgres://seckill@127.0.0.1:1/none', { PG_STATEMENT_TIMEOUT_MS: '300' });
    expect((await sale(url, 'phone', 5, 60_000)).status).toBe(200);
    expect((await client.xinfo('GROUPS', k.orders)) as unknown[]).toHaveLength(1);
    const ids = [await buy(url, 'phone', 'd1'), await buy(url, 'phone', 'd2'), await buy(url, 'phone', 'd3')];
    expect((await pay(url, ids[0], 'p-d1')).status).toBe(200);
    const restart = await sale(url, 'phone', 5, 60_000);
    expect(restart.body).toMatchObject({ statusCode: 409, code: 'SALE_NOT_SETTLED' });
    // Nothing was discarded: the three orders and the payment are still in Redis.
    expect(await client.hlen(k.states)).toBe(3);
    expect((await request(url, 'GET', `/api/orders/${ids[0]}`)).body).toMatchObject({ status: 'paid' });
    // /health says settlement fails, and why, though nothing else is wrong with the sale.
    await sleep(1_100); // /health looks at most once a second
    const health = await request(url, 'GET', '/health');
    expect(health.body.settlement).toMatchObject({
      database: 'down',
      state: 'failing',
      reason: expect.stringMatching(/migrate PostgreSQL/),
      unsettled: 4,
    });
    // Closing does not help while PostgreSQL is away: it cancels, and the restart still refuses.
    const closed = await request(url, 'POST', '/api/products/phone/close', { admin: true });
    expect(closed.body).toMatchObject({ cancelled: 2, unsettled: 6 });
    expect((await sale(url, 'phone', 5, 60_000)).body.code).toBe('SALE_NOT_SETTLED');
  }, 60_000);

  it('a restart right after a purchase never discards an order PostgreSQL does not hold', async () => {
    const prefix = uniquePrefix('restart-at-once');
    const { url } = await app(prefix, await database());
    for (let i = 0; i < 10; i++) {
      expect((await sale(url, `r${i}`, 5, 60_000)).status).toBe(200);
      const id = await buy(url, `r${i}`, `u${i}`);
      const restart = await sale(url, `r${i}`, 5, 60_000);
      // Reserved: settled yet or not, a restart must wait for it.
      expect({ i, status: restart.status }).toEqual({ i, status: 409 });
      expect(['SALE_NOT_SETTLED', 'SALE_HAS_RESERVATIONS']).toContain(restart.body.code);
      expect((await request(url, 'GET', `/api/orders/${id}`)).body.status).toBe('reserved');
    }
  }, 60_000);

  it('a settler elsewhere (npm run settle) marks the prefix: an instance without DATABASE_URL makes the group with its sales, and keeps it, so its restarts lose nothing', async () => {
    const prefix = uniquePrefix('elsewhere');
    const keys = new KeyLayout(prefix);
    const k = keys.product('phone');
    const pool = createPool({ databaseUrl: await database(), pgStatementTimeoutMs: 5_000 });
    try {
      await migrate(pool);
      // The standalone settler's first pass, before any sale: it marks the prefix.
      const settler = new Settler(client, pool, keys, {
        settleBatch: 100,
        settleClaimIdleMs: 60_000,
        settleTrim: false,
      });
      expect(await settler.settleOnce()).toBe(0);
      expect(await client.get(keys.settling)).toBe('1');
      const seller = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: prefix, EXPIRY_SWEEP_MS: '60000' });
      stack.opened(seller);
      await sale(seller.url, 'phone', 5, 60_000);
      expect((await client.xinfo('GROUPS', k.orders)) as unknown[]).toHaveLength(1);
      const ids = [await buy(seller.url, 'phone', 'e1'), await buy(seller.url, 'phone', 'e2')];
      expect((await pay(seller.url, ids[0], 'p-e1')).status).toBe(200);
      expect((await sale(seller.url, 'phone', 5, 60_000)).body.code).toBe('SALE_NOT_SETTLED');
      // Settled by the standalone settler, the other closed: the restart goes, and keeps the group.
      await settler.settleOnce();
      expect((await sale(seller.url, 'phone', 5, 60_000)).body.code).toBe('SALE_HAS_RESERVATIONS');
      // The close waits for the settler elsewhere too (the prefix is marked): its lag is in Redis.
      settler.start();
      try {
        expect((await request(seller.url, 'POST', '/api/products/phone/close', { admin: true })).body).toMatchObject({
          cancelled: 1,
          unsettled: 0,
        });
      } finally {
        await settler.stop();
      }
      expect((await sale(seller.url, 'phone', 5, 60_000)).status).toBe(200);
      expect((await client.xinfo('GROUPS', k.orders)) as unknown[]).toHaveLength(1);
      const { rows } = await pool.query('SELECT order_id, status FROM orders ORDER BY order_id');
      expect(Object.fromEntries(rows.map((r: { order_id: string; status: string }) => [r.order_id, r.status]))).toEqual(
        {
          [ids[0]]: 'paid',
          [ids[1]]: 'cancelled',
        },
      );
    } finally {
      await pool.end();
    }
  }, 60_000);

  it('npm run settle marks the prefix before it asks PostgreSQL anything: one that cannot reach it still keeps every reset from discarding orders', async () => {
    const keys = new KeyLayout(uniquePrefix('settle-down'));
    const run = spawnSync(process.execPath, [join(APP_CWD, 'src', 'settle.js')], {
      cwd: APP_CWD,
      env: {
        ...process.env,
        REDIS_URL: redis.url,
        KEY_PREFIX: keys.prefix,
        ADMIN_TOKEN,
        DATABASE_URL: 'postgres://seckill@127.0.0.1:1/none',
        PG_STATEMENT_TIMEOUT_MS: '300',
      },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/ECONNREFUSED/);
    expect(await client.get(keys.settling)).toBe('1');
  }, 30_000);

  it("a close waits for its own product's settlement while another product's fails", async () => {
    const prefix = uniquePrefix('close-beside');
    const keys = new KeyLayout(prefix);
    // Another listed product whose log is not a stream: its batches fail (WRONGTYPE), always.
    await client.sadd(keys.products, 'broken');
    await client.set(keys.product('broken').orders, 'x');
    await markWritten(client, keys, 'broken');
    const { url } = await app(prefix, await database());
    await sale(url, 'phone', 5, 60_000);
    for (const user of ['b1', 'b2', 'b3']) await buy(url, 'phone', user);
    await sleep(1_100); // /health looks at most once a second
    expect((await request(url, 'GET', '/health')).body.settlement).toMatchObject({ state: 'failing' });
    const closed = await request(url, 'POST', '/api/products/phone/close', { admin: true });
    expect(closed.body).toMatchObject({ cancelled: 3, unsettled: 0 });
    expect((await sale(url, 'phone', 5, 60_000)).status).toBe(200);
  }, 30_000);

  it('close, then restart: the sale ends, its reservations are cancelled and settled, paid orders stay paid, and PostgreSQL holds every order with its final status', async () => {
    const prefix = uniquePrefix('close');
    const k = new KeyLayout(prefix).product('phone');
    const db = await database();
    const { url } = await app(prefix, db);
    await sale(url, 'phone', 5, 60_000);
    const ids = [await buy(url, 'phone', 'c1'), await buy(url, 'phone', 'c2'), await buy(url, 'phone', 'c3')];
    expect((await pay(url, ids[0], 'p-c1')).status).toBe(200);
    expect((await sale(url, 'phone', 5, 60_000)).body.code).toMatch(/^SALE_(NOT_SETTLED|HAS_RESERVATIONS)$/);

    const closed = await request(url, 'POST', '/api/products/phone/close', { admin: true });
    expect(closed.status).toBe(200);
    expect(closed.body).toMatchObject({ cancelled: 2, unsettled: 0, product: { stock: 4, sold: 1, orders: 3 } });
    expect(Date.parse(closed.body.product.endsAt as string)).toBeLessThanOrEqual(
      Date.parse(closed.body.product.serverTime as string),
    );
    // Nothing is sold after the close, and closing again changes nothing.
    expect(
      (await request(url, 'POST', '/api/orders', { json: { productId: 'phone', userId: 'late' } })).body.code,
    ).toBe('SALE_ENDED');
    expect((await request(url, 'POST', '/api/products/phone/close', { admin: true })).body).toMatchObject({
      cancelled: 0,
      unsettled: 0,
      product: { endsAt: closed.body.product.endsAt },
    });
    expect((await request(url, 'POST', '/api/products/phone/close')).body.code).toBe('UNAUTHORIZED');
    expect((await request(url, 'POST', '/api/products/nope/close', { admin: true })).body.code).toBe('UNKNOWN_PRODUCT');

    expect(await checkSettled(db, client, k, 'phone')).toMatchObject({ ok: true, rows: 3 });
    const restart = await sale(url, 'phone', 5, 60_000);
    expect(restart.status).toBe(200);
    expect(restart.body).toMatchObject({ stock: 5, orders: 0, endsAt: null });
    const pg = new Client({ connectionString: db });
    await pg.connect();
    try {
      const { rows } = await pg.query('SELECT order_id, status FROM orders ORDER BY order_id');
      expect(Object.fromEntries(rows.map((r: { order_id: string; status: string }) => [r.order_id, r.status]))).toEqual(
        { [ids[0]]: 'paid', [ids[1]]: 'cancelled', [ids[2]]: 'cancelled' },
      );
    } finally {
      await pg.end();
    }
  }, 60_000);

  it('migration 3 gives order_events settled_at: rows written before it stay NULL, rows written after get the time of their insert', async () => {
    const pool = createPool({ databaseUrl: await database(), pgStatementTimeoutMs: 5_000 });
    const insert = (streamId: string) =>
      pool.query(
        "INSERT INTO order_events (product_id, stream_id, order_id, event, at) VALUES ('phone', $1, $2, 'created', now())",
        [streamId, `phone.${streamId}`],
      );
    try {
      // A database as the release before left it: migrations 1 and 2, with an event in it.
      expect(await migrate(pool, migrations().slice(0, 2))).toEqual([1, 2]);
      await insert('1-1');
      expect(await migrate(pool)).toEqual([3]);
      await insert('2-1');
      const { rows } = await pool.query<{ stream_id: string; timed: boolean }>(
        'SELECT stream_id, settled_at IS NOT NULL AS timed FROM order_events ORDER BY stream_id',
      );
      expect(rows).toEqual([
        { stream_id: '1-1', timed: false },
        { stream_id: '2-1', timed: true },
      ]);
    } finally {
      await pool.end();
    }
  }, 30_000);

  it("a claim scan's cursor from a stream since made anew skips nothing: the scan goes round once more from the start", async () => {
    const keys = new KeyLayout(uniquePrefix('claim-cursor'));
    const stream = keys.product('phone').orders;
    const pool = createPool({ databaseUrl: await database(), pgStatementTimeoutMs: 5_000 });
    const entry = (i: number) => ['orderId', `phone.o${i}`, 'userId', `u${i}`, 'quantity', '1'];
    /** A stream whose entries (explicit ids) a consumer that died has read and not acknowledged. */
    const abandoned = async (ids: string[]) => {
      await client.del(stream);
      await client.xgroup('CREATE', stream, SETTLE_GROUP, '0', 'MKSTREAM');
      for (const [i, id] of ids.entries()) await client.xadd(stream, id, ...entry(Number(id.split('-')[0]) * 10 + i));
      await client.xreadgroup('GROUP', SETTLE_GROUP, 'dead', 'STREAMS', stream, '>');
    };
    try {
      await migrate(pool);
      await client.sadd(keys.products, 'phone');
      const settler = new Settler(client, pool, keys, { settleBatch: 2, settleClaimIdleMs: 100, settleTrim: false });
      await abandoned(['1000-1', '1000-2', '1000-3', '1000-4', '1000-5']);
      await markWritten(client, keys, 'phone');
      await sleep(150);
      // Two claimed and settled: the scan's cursor now sits at 1000-3.
      expect(await settler.settleOnce()).toBe(2);
      // The sale restarted: a new stream, its entries below that cursor, left by a dead consumer.
      await abandoned(['5-1', '6-1']);
      await sleep(150);
      expect(await settler.settleOnce()).toBe(2);
      expect(await client.xpending(stream, SETTLE_GROUP)).toEqual([0, null, null, null]);
    } finally {
      await pool.end();
    }
  }, 30_000);

  it("a dead instance's consumer is gone from the group once its entries, claimed by another, are settled", async () => {
    const keys = new KeyLayout(uniquePrefix('dead-consumer'));
    const stream = keys.product('phone').orders;
    const pool = createPool({ databaseUrl: await database(), pgStatementTimeoutMs: 5_000 });
    const consumers = async () =>
      ((await client.xinfo('CONSUMERS', stream, SETTLE_GROUP)) as string[][]).map((c) => c[1]);
    try {
      await migrate(pool);
      await client.xgroup('CREATE', stream, SETTLE_GROUP, '0', 'MKSTREAM');
      await client.xadd(stream, '*', 'orderId', 'phone.o1', 'userId', 'u1', 'quantity', '1');
      await markWritten(client, keys, 'phone');
      // An instance reads the entry and dies before its XACK; the product is not sold again.
      await client.xreadgroup('GROUP', SETTLE_GROUP, 'dead-host/1', 'STREAMS', stream, '>');
      expect(await consumers()).toEqual(['dead-host/1']);
      const settler = new Settler(client, pool, keys, { settleBatch: 10, settleClaimIdleMs: 100, settleTrim: false });
      // Claimed once it has been idle SETTLE_CLAIM_IDLE_MS, settled, then the product found settled.
      await sleep(150);
      expect(await settler.settleOnce()).toBe(1);
      expect(await settler.settleOnce()).toBe(0);
      expect(await client.zcard(keys.marks(MARK_TAGS[0]).settle)).toBe(0);
      expect(await client.xpending(stream, SETTLE_GROUP)).toEqual([0, null, null, null]);
      expect(await consumers()).not.toContain('dead-host/1');
    } finally {
      await pool.end();
    }
  }, 30_000);

  it("a pass settles a few products at once: one whose batch waits on PostgreSQL holds up no other's (the buckets of one product are products here)", async () => {
    const keys = new KeyLayout(uniquePrefix('at-once'));
    const db = await database();
    const pool = createPool({ databaseUrl: db, pgStatementTimeoutMs: 60_000 });
    const blocker = new Client({ connectionString: db });
    const settler = new Settler(client, pool, keys, { settleBatch: 10, settleClaimIdleMs: 60_000, settleTrim: false });
    try {
      await migrate(pool);
      await blocker.connect();
      // The first product's order row is held by a transaction left open: its batch's
      // INSERT ... ON CONFLICT waits for it (up to the statement timeout, a minute, longer
      // than the test waits for the second). The second's is free.
      await blocker.query('BEGIN');
      await blocker.query(
        "INSERT INTO orders (order_id, product_id, user_id, quantity, status, created_at, updated_at) VALUES ('a-first.o1', 'a-first', 'u1', 1, 'reserved', now(), now())",
      );
      for (const id of ['a-first', 'b-second']) {
        await client.xadd(keys.product(id).orders, '*', 'orderId', `${id}.o1`, 'userId', 'u1', 'quantity', '1');
        await markWritten(client, keys, id);
      }
      const pass = settler.settleOnce();
      const second = await until("the second product's order in PostgreSQL", async () => {
        const { rows } = await pool.query("SELECT status FROM orders WHERE order_id = 'b-second.o1'");
        return rows.length > 0 ? rows[0] : undefined;
      });
      expect(second).toEqual({ status: 'reserved' });
      await blocker.query('ROLLBACK');
      expect(await pass).toBe(2);
    } finally {
      await blocker.end();
      await pool.end();
    }
  }, 45_000);

  it("one product's trouble holds up no other's settlement or expiry", async () => {
    const prefix = uniquePrefix('isolation');
    const keys = new KeyLayout(prefix);
    const k = keys.product('phone');
    // Listed products with work whose stream and order states are not a stream and a
    // hash: every command on them fails (WRONGTYPE), as on a shard that is down.
    // Several, marked first and due first, so that a pass meets them before the good product.
    for (const id of ['aaa-bad', 'bad-2', 'bad-3', 'bad-4', 'bad-5', 'bad-6', 'bad-7', 'bad-8']) {
      const b = keys.product(id);
      await client.sadd(keys.products, id);
      await client.set(b.orders, 'x');
      await client.set(b.states, 'x');
      await markWritten(client, keys, id);
      await client.zadd(keys.marks(MARK_TAGS[0]).due, 0, `${id}.00000000-0000-4000-8000-000000000000`);
    }
    // A deadline left in the shard's index by an order no longer reserved (its outcome
    // decided on another node, its slot since moved): the sweeper drops it.
    const due = keys.marks(MARK_TAGS[0]).due;
    const stale = 'phone.00000000-0000-4000-8000-00000000000f';
    await client.zadd(due, 1, stale);
    const db = await database();
    const { url } = await app(prefix, db, { EXPIRY_SWEEP_MS: '50' });
    await sale(url, 'phone', 2, 1000);
    const ids = [await buy(url, 'phone', 'i1'), await buy(url, 'phone', 'i2')];
    for (let i = 0; (await client.zcard(k.deadlines)) > 0; i++) {
      expect(i).toBeLessThan(100);
      await sleep(50);
    }
    expect(await client.get(k.stock)).toBe('2');
    expect(await waitForSettlement(client, k, 20_000)).not.toBeNull();
    expect(await checkSettled(db, client, k, 'phone')).toMatchObject({ ok: true, rows: 2 });
    expect((await request(url, 'GET', `/api/orders/${ids[0]}`)).body.status).toBe('expired');
    expect(await client.zscore(due, stale)).toBeNull();
    // The bad ones stay, tried again each round.
    expect(await client.zcard(due)).toBe(8);
  }, 30_000);

  it('SETTLE_TRIM: the stream loses what every group has settled, and nothing another group still has pending or unread', async () => {
    const prefix = uniquePrefix('trim');
    const k = new KeyLayout(prefix).product('phone');
    const db = await database();
    const { url } = await app(prefix, db, { SETTLE_TRIM: '1' });
    await sale(url, 'phone', 10, 60_000);
    // Another reader of the order log, slower than the settler.
    await client.xgroup('CREATE', k.orders, 'audit', '0', 'MKSTREAM');
    const settled = async (orders: number) => {
      expect(await waitForSettlement(client, k, 20_000)).not.toBeNull();
      expect(await checkSettled(db, client, k, 'phone')).toMatchObject({ ok: true, rows: orders });
    };
    for (const user of ['t1', 't2', 't3']) await buy(url, 'phone', user);
    await settled(3);
    expect(await client.xlen(k.orders)).toBe(3); // audit has read nothing
    const read = (await client.xreadgroup('GROUP', 'audit', 'a', 'COUNT', 2, 'STREAMS', k.orders, '>')) as [
      string,
      [string, string[]][],
    ][];
    const ids = read[0][1].map(([id]) => id);
    await buy(url, 'phone', 't4');
    await settled(4);
    expect(await client.xlen(k.orders)).toBe(4); // both still pending in audit
    await client.xack(k.orders, 'audit', ...ids);
    await buy(url, 'phone', 't5');
    await settled(5);
    // The two audit acknowledged went; the three it has not read stay.
    expect(await client.xlen(k.orders)).toBe(3);
    expect((await client.xrange(k.orders, '-', '+')).map(([id]) => id)).not.toContain(ids[0]);
    // The order count and a restart's refusal still see all five orders.
    expect((await request(url, 'GET', '/api/products/phone')).body.orders).toBe(5);
    const restart = await request(url, 'PUT', '/api/products/phone', { json: { stock: 3 }, admin: true });
    expect(restart.body).toMatchObject({ statusCode: 409, code: 'SALE_HAS_ORDERS' });
  }, 60_000);

  it('an instance starts and sells while PostgreSQL is unreachable, and says so', async () => {
    const prefix = uniquePrefix('no-pg');
    // A port nothing listens on.
    const { url } = await app(prefix, 'postgres://seckill@127.0.0.1:1/none', { PG_STATEMENT_TIMEOUT_MS: '300' });
    await sale(url, 'phone', 2, 60_000);
    await buy(url, 'phone', 'n1');
    await sleep(1_100);
    const health = await request(url, 'GET', '/health');
    expect(health.status).toBe(200);
    expect(health.body.settlement).toMatchObject({ database: 'down', unsettled: 1 });
  }, 30_000);

  it('a payment after the deadline loses to it even before any sweep: 409 ORDER_EXPIRED, the unit back once', async () => {
    const prefix = uniquePrefix('late-pay');
    const k = new KeyLayout(prefix).product('phone');
    // No sweep during the test: the payment itself meets the passed deadline.
    const { url } = await app(prefix, await database(), { EXPIRY_SWEEP_MS: '60000' });
    await sale(url, 'phone', 1, 1000);
    const id = await buy(url, 'phone', 'late');
    await sleep(1200);
    expect(await client.zcard(k.deadlines)).toBe(1);
    const late = await pay(url, id, 'p-late');
    expect(late.body).toMatchObject({ statusCode: 409, code: 'ORDER_EXPIRED' });
    expect(late.body.message).toMatch(/refunded/);
    // And again: still expired, nothing returned twice.
    expect((await request(url, 'POST', `/api/orders/${id}/cancel`)).body.code).toBe('ORDER_EXPIRED');
    expect(await client.get(k.stock)).toBe('1');
    expect(await client.zcard(k.deadlines)).toBe(0);
    const events = (await client.xrange(k.orders, '-', '+')).map(([, f]) => f[1]);
    expect(events).toEqual([id, 'expired']);
  }, 30_000);

  it('pay racing expiry on many orders: exactly one outcome each, each answer true, the stock exact', async () => {
    const prefix = uniquePrefix('pay-vs-expiry');
    const k = new KeyLayout(prefix).product('phone');
    const db = await database();
    // Two instances sweep every 10 ms while the payments arrive around the deadline.
    const a = await app(prefix, db, { EXPIRY_SWEEP_MS: '10' });
    const b = await app(prefix, db, { EXPIRY_SWEEP_MS: '10' });
    const orders = 120;
    await sale(a.url, 'phone', orders, 1000);
    const ids = await Promise.all(Array.from({ length: orders }, (_, i) => buy(a.url, 'phone', `r${i}`)));
    const placedAt = Date.now();
    // Spread over 700-1300 ms after the orders: before, at and after their deadline.
    const answers = await Promise.all(
      ids.map(async (id, i) => {
        await sleep(Math.max(0, placedAt + 700 + (600 * i) / orders - Date.now()));
        const via = i % 2 === 0 ? a.url : b.url;
        return pay(via, id, `p${i}`);
      }),
    );
    for (let i = 0; (await client.zcard(k.deadlines)) > 0; i++) {
      expect(i).toBeLessThan(100);
      await sleep(50);
    }
    const states = await client.hgetall(k.states);
    const paid = ids.filter((id) => states[id].startsWith('P|'));
    const expired = ids.filter((id) => states[id].startsWith('E|'));
    expect(paid.length + expired.length).toBe(orders);
    // Each answer says what Redis did: 200 for the paid ones, 409 ORDER_EXPIRED for the rest.
    answers.forEach((res, i) => {
      if (states[ids[i]].startsWith('P|')) expect(res.status).toBe(200);
      else expect(res.body.code).toBe('ORDER_EXPIRED');
    });
    // Every expired unit back once, none of the paid ones.
    expect(Number(await client.get(k.stock))).toBe(expired.length);
    const events = (await client.xrange(k.orders, '-', '+')).filter(([, f]) => f[0] === 'event');
    expect(events.length).toBe(orders);
    expect(new Set(events.map(([, f]) => f[3])).size).toBe(orders);
    expect(await waitForSettlement(client, k, 20_000)).not.toBeNull();
    expect(await checkSettled(db, client, k, 'phone')).toMatchObject({ ok: true, rows: orders });
  }, 60_000);

  it('PostgreSQL stopped while the settler is mid-batch: the app lives on and sells, and settles all once it is back', async () => {
    // A server of its own: stopping the shared one would stop the other tests' settlers.
    const own = await startPrivatePostgres();
    const prefix = uniquePrefix('pg-stopped');
    const k = new KeyLayout(prefix).product('phone');
    const db = await own.createDatabase('stopped');
    // The app stops itself with its first batch written and not committed: its
    // connection checked out, the one moment a connection's 'error' has no pool to catch it.
    const seller = await startApp({
      env: {
        REDIS_URL: redis.url,
        KEY_PREFIX: prefix,
        DATABASE_URL: db,
        ADMIN_TOKEN,
        LOG_LEVEL: 'warn',
        PG_STATEMENT_TIMEOUT_MS: '500',
        FAULT_STOP_AT: 'settle-before-commit:1',
        ALLOW_UNSAFE: '1',
      },
    });
    try {
      expect((await sale(seller.url, 'phone', 400, 60_000)).status).toBe(200);
      const before = Promise.all(Array.from({ length: 100 }, (_, i) => buy(seller.url, 'phone', `s${i}`)));
      for (let i = 0; processState(seller.pid) !== 'T'; i++) {
        expect(i).toBeLessThan(400);
        await sleep(25);
      }
      // PostgreSQL goes (its fast shutdown closes the stopped app's connection), then the app runs on.
      await own.stop();
      process.kill(seller.pid, 'SIGCONT');
      const placed = await before;
      const during = await Promise.all(Array.from({ length: 100 }, (_, i) => buy(seller.url, 'phone', `d${i}`)));
      // Degraded, not down: the instance sells, settlement waits, and says how far behind it is
      // (once /health's look of a second ago, from before the stop, has aged).
      await sleep(1_100);
      const health = await request(seller.url, 'GET', '/health');
      expect(health.status).toBe(200);
      expect(health.body.settlement).toMatchObject({ database: 'down', unsettled: expect.any(Number) });
      expect(health.body.settlement.unsettled).toBeGreaterThan(0);
      await sleep(1_000);
      expect(processState(seller.pid)).not.toBeNull();
      expect((await request(seller.url, 'GET', '/health/live')).status).toBe(200);
      const restarted = await startPrivatePostgres({ port: own.port, dir: own.dir });
      expect(await waitForSettlement(client, k, 30_000)).not.toBeNull();
      expect(await checkSettled(db, client, k, 'phone')).toMatchObject({
        ok: true,
        rows: placed.length + during.length,
      });
      await restarted.remove();
    } finally {
      await seller.stop();
      await own.remove();
    }
  }, 90_000);

  /** A settler app process that stops itself at `point` (its first batch), then is SIGKILLed; another settles. */
  async function killedSettler(point: 'settle-before-ack' | 'settle-before-commit') {
    const prefix = uniquePrefix(point);
    const k = new KeyLayout(prefix).product('phone');
    const db = await database();
    const victim = await startApp({
      env: {
        REDIS_URL: redis.url,
        KEY_PREFIX: prefix,
        DATABASE_URL: db,
        ADMIN_TOKEN,
        ALLOW_UNSAFE: '1',
        FAULT_STOP_AT: `${point}:1`,
        LOG_LEVEL: 'warn',
        // Its first batch holds every order: they are all placed before it looks.
        SETTLE_BATCH: '1000',
      },
    });
    try {
      // The orders are sold by another instance (no settler of its own): the victim only
      // settles, so its stop leaves no buyer waiting on it.
      const seller = await startTestApp({ REDIS_URL: redis.url, KEY_PREFIX: prefix });
      stack.opened(seller);
      const orders = 30;
      expect((await sale(seller.url, 'phone', orders, 60_000)).status).toBe(200);
      await Promise.all(Array.from({ length: orders }, (_, i) => buy(seller.url, 'phone', `k${i}`)));
      for (let i = 0; processState(victim.pid) !== 'T'; i++) {
        expect(i).toBeLessThan(200);
        await sleep(25);
      }
      expect(victim.tail()).toContain(`FAULT_STOP_AT=${point}:1`);
      const pgc = new Client({ connectionString: db });
      await pgc.connect();
      const count = async () => (await pgc.query('SELECT count(*)::int AS n FROM orders')).rows[0].n as number;
      const inBatch = await unsettled(client, k);
      expect(inBatch).toBeGreaterThan(0);
      // After COMMIT: the batch is in PostgreSQL, and still pending in Redis.
      // Before COMMIT: nothing of it is visible.
      if (point === 'settle-before-ack') expect(await count()).toBeGreaterThan(0);
      else expect(await count()).toBe(0);
      process.kill(victim.pid, 'SIGKILL');
      await victim.stop();
      // Another instance claims the dead consumer's entries after SETTLE_CLAIM_IDLE_MS and settles them.
      await app(prefix, db, { SETTLE_CLAIM_IDLE_MS: '300' });
      expect(await waitForSettlement(client, k, 20_000)).not.toBeNull();
      expect(await count()).toBe(orders);
      const check = await checkSettled(db, client, k, 'phone');
      expect(check).toMatchObject({ ok: true, rows: orders });
      const { rows } = await pgc.query('SELECT count(*)::int AS n FROM order_events');
      expect(rows[0].n).toBe(orders);
      await pgc.end();
    } finally {
      await victim.stop();
    }
  }

  it('a settler killed after COMMIT and before XACK: its batch is claimed by another and written once', async () => {
    await killedSettler('settle-before-ack');
  }, 90_000);

  it('a settler killed before COMMIT: nothing half-written, its batch claimed by another and settled', async () => {
    await killedSettler('settle-before-commit');
  }, 90_000);
});
