import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { Client } from 'pg';
import { listProducts, request } from '../harness/http';
import { APP_MAIN } from '../harness/paths';
import { PrivatePostgres, startPrivatePostgres } from '../harness/postgres';
import { RunningApp, startApp } from '../harness/processes';
import { KeyLayout } from '../src/redis/key-layout';
import { ADMIN_TOKEN, pay, PAYMENT_SECRET } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

/** Units of each listed product. */
const STOCK = 10;
/** The payment deadline of the reservations left open: they never expire during the test. */
const OPEN_MS = 10 * 60 * 1000;
/** The payment deadline of the one reservation per round left to expire: the shortest a sale takes. */
const SOON_MS = 1_000;
/** After the round's work is settled, before the window: a pass that was under way ends. */
const QUIET_MS = 1_000;
/** The idle window: long enough for many passes of every loop (the settler's is 50 ms, the sweeper's 500 ms). */
const WINDOW_MS = 3_000;

/**
 * Issue 39's proof that idle is idle: what an instance that settles and sweeps costs
 * Redis when nothing happens must not grow with the number of products listed. The
 * built app as a process (dist/src/main.js) with settlement (a real PostgreSQL) and
 * expiry on, on a Redis of this file's own; 10 products listed, a few sold (paid, left
 * reserved, left to expire), settled, then Redis's own count of the commands it ran
 * (INFO commandstats) over an idle window; then 2,000 products, the same again. A ratio
 * of two counts and a bound on commands, never a time.
 */
describe('an idle instance, with 10 products listed and with 2,000', () => {
  let redis: TestRedis;
  let pg: PrivatePostgres;
  let admin: Redis;
  let app: RunningApp | undefined;

  beforeAll(async () => {
    if (!existsSync(APP_MAIN)) throw new Error('dist/src/main.js is missing: run `npm run build` first');
    [redis, pg] = await Promise.all([startTestRedis(), startPrivatePostgres()]);
    admin = new Redis(redis.url);
  }, 60_000);

  afterAll(async () => {
    await app?.stop();
    await closeClient(admin);
    await Promise.all([redis?.stop(), pg?.remove()]);
  });

  it('costs Redis about as many commands a second with 2,000 products as with 10, and still settles and expires', async () => {
    const prefix = uniquePrefix('idle');
    const keys = new KeyLayout(prefix);
    const db = await pg.createDatabase(`catalog_idle_${process.pid}`);
    app = await startApp({
      env: {
        REDIS_URL: redis.url,
        KEY_PREFIX: prefix,
        DATABASE_URL: db,
        ADMIN_TOKEN,
        PAYMENT_WEBHOOK_SECRET: PAYMENT_SECRET,
        LOG_LEVEL: 'error',
      },
    });
    const url = app.url;
    const settled: Record<string, string> = {};

    /**
     * Lists `ids` and `soon` (its payment deadline SOON_MS), then sells one unit of four
     * of them: the first paid, the next two left reserved, `soon`'s left to expire; waits
     * until it has expired (its unit back) and PostgreSQL holds every order so far in
     * the status Redis gave it.
     */
    const round = async (ids: string[], soon: string) => {
      await listProducts(url, ADMIN_TOKEN, ids, STOCK, OPEN_MS);
      await listProducts(url, ADMIN_TOKEN, [soon], STOCK, SOON_MS);
      const buy = async (productId: string) => {
        const res = await request(url, 'POST', '/api/orders', { json: { productId, userId: `u-${productId}` } });
        expect(res.status).toBe(201);
        return res.body.orderId as string;
      };
      const [paid, open1, open2, expiring] = await Promise.all([ids[0], ids[1], ids[2], soon].map(buy));
      expect((await pay(url, paid, `pay-${paid}`)).status).toBe(200);
      Object.assign(settled, { [paid]: 'paid', [open1]: 'reserved', [open2]: 'reserved', [expiring]: 'expired' });

      for (let i = 0; (await request(url, 'GET', `/api/orders/${expiring}`)).body.status !== 'expired'; i++) {
        expect(i).toBeLessThan(300);
        await sleep(50);
      }
      expect(await admin.get(keys.product(soon).stock)).toBe(String(STOCK));
      const want = JSON.stringify(sorted(settled));
      for (let i = 0; ; i++) {
        const inPostgres = JSON.stringify(await ordersIn(db));
        if (inPostgres === want) break;
        if (i >= 600) expect(inPostgres).toEqual(want);
        await sleep(50);
      }
    };

    await round(
      Array.from({ length: 9 }, (_, i) => `p-${i}`),
      'soon-1',
    );
    expect(await admin.scard(keys.products)).toBe(10);
    const small = await idleCost(admin);

    await round(
      Array.from({ length: 1_989 }, (_, i) => `p-${i + 9}`),
      'soon-2',
    );
    expect(await admin.scard(keys.products)).toBe(2_000);
    const big = await idleCost(admin);

    const problems: string[] = [];
    if (big.perSecond > 2 * small.perSecond + 20)
      problems.push(
        `idle with 2,000 products listed: ${big.perSecond} Redis commands/s, more than 2x (+20) the ${small.perSecond}/s with 10 ` +
          `(with 2,000: ${big.byCommand}; with 10: ${small.byCommand})`,
      );
    if (big.perSecond >= 100)
      problems.push(`idle with 2,000 products listed: ${big.perSecond} Redis commands/s, not under 100/s`);
    expect(problems).toEqual([]);
  }, 300_000);
});

/** Redis's count of each command it has run since it started (INFO commandstats), by name. */
async function commandCounts(admin: Redis): Promise<Map<string, number>> {
  const stats = await admin.info('commandstats');
  return new Map([...stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map(([, name, calls]) => [name, Number(calls)]));
}

/**
 * The commands Redis ran over an idle window of WINDOW_MS, but this test's: per second,
 * and the busiest commands by name.
 */
async function idleCost(admin: Redis): Promise<{ perSecond: number; byCommand: string }> {
  await sleep(QUIET_MS);
  const before = await commandCounts(admin);
  await sleep(WINDOW_MS);
  const after = await commandCounts(admin);
  const ran = [...after].map(([name, calls]) => [name, calls - (before.get(name) ?? 0)] as const);
  // Redis counts a command once it has answered: the second INFO counts the first, not itself.
  const others = ran.map(([name, calls]) => [name, name === 'info' ? calls - 1 : calls] as const);
  const total = others.reduce((sum, [, calls]) => sum + calls, 0);
  const busiest = others
    .filter(([, calls]) => calls > 0)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([name, calls]) => `${name} ${calls}`);
  return {
    perSecond: Math.round((total * 10_000) / WINDOW_MS) / 10,
    byCommand: `${total} commands in ${WINDOW_MS} ms: ${busiest.join(', ') || 'none'}`,
  };
}

/** Every order in PostgreSQL and its status, by order id. */
async function ordersIn(db: string): Promise<Record<string, string>> {
  const client = new Client({ connectionString: db });
  await client.connect();
  try {
    const { rows } = await client.query<{ order_id: string; status: string }>('SELECT order_id, status FROM orders');
    return sorted(Object.fromEntries(rows.map((r) => [r.order_id, r.status])));
  } finally {
    await client.end();
  }
}

function sorted(byId: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(byId).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}
