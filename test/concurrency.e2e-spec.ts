import { Redis } from 'ioredis';
import { LOCK_STRATEGY_NAMES, LockStrategyName, UNSAFE_STRATEGIES } from '../src/config/app-config';
import { startTcpProxy, TcpProxy } from '../harness/tcp-proxy';
import { KeyLayout } from '../src/redis/key-layout';
import { ADMIN_TOKEN, startTestApp, TestApp } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

const BUYERS = 500;
const STOCK = 100;

interface SaleOutcome {
  statuses: Record<number, number>;
  codes: Record<string, number>;
  sold: number;
  stockLeft: number;
  orders: number;
  buyers: number;
  orderIds: string[];
  streamOrderIds: Set<string>;
}

/**
 * Two app instances, each with its own Redis connection (as two processes would
 * have), sharing one Redis: 500 distinct buyers at once for a stock of 100. The
 * verdict is read from Redis, not from the apps' answers.
 */
/**
 * `holdReads`: each app reaches Redis through its own TCP proxy, which holds the app's
 * first stock read and everything its connection sends after it until every buyer's
 * first read (3 commands: the sale's limit, its stock, the buyer's count) has been
 * sent, then lets them all through at once. Every buyer has then read the same stock
 * before any of them writes: the race a lock closes, made to happen on every run
 * instead of on a lucky one.
 */
async function runSale(
  redisUrl: string,
  strategy: LockStrategyName,
  redlockUrls: string,
  options: { holdReads?: boolean } = {},
): Promise<SaleOutcome> {
  const prefix = uniquePrefix(`race-${strategy}`);
  // The wait budget is raised from 5 s because this test proves exclusion and
  // accounting, not latency: the apps and 500 clients share one test process, and a
  // busy CI machine must not turn into LOCK_TIMEOUT answers here.
  const env = {
    REDIS_URL: redisUrl,
    KEY_PREFIX: prefix,
    LOCK_STRATEGY: strategy,
    ALLOW_UNSAFE: '1',
    LOCK_WAIT_MS: '20000',
    REDLOCK_URLS: redlockUrls,
  };
  const target = { port: Number(new URL(redisUrl).port) };
  const proxies: TcpProxy[] = options.holdReads ? [await startTcpProxy(target), await startTcpProxy(target)] : [];
  const apps: TestApp[] = [
    await startTestApp({ ...env, REDIS_URL: proxies[0]?.url ?? redisUrl }),
    await startTestApp({ ...env, REDIS_URL: proxies[1]?.url ?? redisUrl }),
  ];
  const client = new Redis(redisUrl);
  try {
    const setup = await fetch(`${apps[0].url}/api/products/hot`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
      body: JSON.stringify({ stock: STOCK, perUserLimit: 1 }),
    });
    expect(setup.status).toBe(200);

    // HGET of the sale's perUserLimit: the first command of a buyer's read.
    const held = proxies.map((p) => p.holdRequest('perUserLimit'));
    const sentBefore = proxies.map((p) => p.requests());
    // fetch's default agent opens a connection per concurrent request: all 500 are in flight together.
    const answered = Promise.all(
      Array.from({ length: BUYERS }, async (_, i) => {
        const res = await fetch(`${apps[i % 2].url}/api/orders`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ productId: 'hot', userId: `buyer-${i}` }),
        });
        return { status: res.status, body: (await res.json()) as { code?: string; orderId?: string } };
      }),
    );
    if (options.holdReads) {
      await Promise.all(held);
      const sent = () => proxies.reduce((n, p, i) => n + p.requests() - sentBefore[i], 0);
      while (sent() < 3 * BUYERS) await new Promise((resolve) => setTimeout(resolve, 5));
      for (const proxy of proxies) proxy.release();
    }
    const answers = await answered;

    const k = new KeyLayout(prefix).product('hot');
    const [stock, orders, buyers, entries] = await Promise.all([
      client.get(k.stock),
      client.xlen(k.orders),
      client.hlen(k.buyers),
      client.xrange(k.orders, '-', '+'),
    ]);
    const count = (xs: (string | number)[]) =>
      xs.reduce<Record<string, number>>((acc, x) => ({ ...acc, [x]: (acc[x] ?? 0) + 1 }), {});
    return {
      statuses: count(answers.map((a) => a.status)),
      codes: count(answers.map((a) => a.body.code ?? 'CREATED')),
      sold: STOCK - Number(stock),
      stockLeft: Number(stock),
      orders,
      buyers,
      orderIds: answers.filter((a) => a.status === 201).map((a) => a.body.orderId!),
      streamOrderIds: new Set(entries.map(([, fields]) => fields[fields.indexOf('orderId') + 1])),
    };
  } finally {
    await closeClient(client);
    await Promise.all(apps.map((a) => a.close()));
    await Promise.all(proxies.map((p) => p.close()));
  }
}

describe('500 concurrent buyers, stock 100, two app instances', () => {
  jest.setTimeout(60_000);
  let redis: TestRedis;
  /** Three independent lock nodes for `redlock` (the stock stays on `redis`). */
  let lockNodes: TestRedis[] = [];
  const redlockUrls = () => lockNodes.map((n) => n.url).join(',');

  beforeAll(async () => {
    redis = await startTestRedis();
    lockNodes = await Promise.all([0, 1, 2].map(() => startTestRedis()));
  });

  afterAll(async () => {
    await Promise.all([redis, ...lockNodes].map((r) => r?.stop()));
  });

  const SAFE = ['lock', 'fenced', 'reentrant', 'redlock', 'atomic', 'optimistic'] as const;
  it('runs every safe strategy there is (a new one must be added here)', () => {
    const safe = LOCK_STRATEGY_NAMES.filter((name) => !UNSAFE_STRATEGIES.includes(name));
    expect([...SAFE].sort()).toEqual([...safe].sort());
  });

  it.each(SAFE)('%s: sells exactly the stock, every 201 is a recorded order, no 5xx', async (strategy) => {
    const sale = await runSale(redis.url, strategy, redlockUrls());
    expect(sale.orders).toBe(STOCK);
    expect(sale.stockLeft).toBe(0);
    expect(sale.sold).toBe(STOCK);
    expect(sale.buyers).toBe(sale.orders);
    expect(sale.statuses).toEqual({ 201: STOCK, 409: BUYERS - STOCK });
    expect(sale.codes).toEqual({ CREATED: STOCK, SOLD_OUT: BUYERS - STOCK });
    expect(sale.orderIds.every((id) => sale.streamOrderIds.has(id))).toBe(true);
  });

  it('none: the same sale without a lock oversells (proves the check can see it)', async () => {
    const sale = await runSale(redis.url, 'none', redlockUrls(), { holdReads: true });
    expect(sale.sold).toBeGreaterThan(STOCK);
    expect(sale.stockLeft).toBeLessThan(0);
    expect(sale.orders).toBeGreaterThan(STOCK);
    // It is still a consistent record of the damage: every 201 is in the log.
    expect(sale.orderIds.every((id) => sale.streamOrderIds.has(id))).toBe(true);
    expect(sale.statuses[500]).toBeUndefined();
  });
});
