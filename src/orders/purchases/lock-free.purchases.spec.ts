import { Redis } from 'ioredis';
import { closeClient, resetPlainSale, startTestRedis, TestRedis, uniquePrefix } from '../../../test/helpers/redis';
import { loadConfig } from '../../config/app-config';
import { InsufficientStockError, LimitReachedError, SoldOutError, UnknownProductError } from '../../errors/errors';
import { KeyLayout, ProductKeys } from '../../redis/key-layout';
import { FaultStop } from '../fault-stop';
import { OptimisticPurchases } from './optimistic.purchases';
import type { PurchasePath } from './purchase-path';
import { ScriptedPurchases } from './scripted.purchases';

const config = (redisUrl: string) =>
  loadConfig({ REDIS_URL: redisUrl, ADMIN_TOKEN: 'a-long-enough-admin-token', LOCK_WAIT_MS: '10000' });

/** Closes what a path opened of its own (the optimistic path's WATCH connections). */
const close = async (path: PurchasePath) => (path as Partial<OptimisticPurchases>).onApplicationShutdown?.();

describe.each([
  ['atomic', (redis: Redis, keys: KeyLayout) => new ScriptedPurchases(redis, keys, config('redis://unused:1'))],
  [
    'optimistic',
    (redis: Redis, keys: KeyLayout) =>
      new OptimisticPurchases(redis, keys, config('redis://unused:1'), new FaultStop(null)),
  ],
] as const)('%s (lock-free) against a real Redis', (_name, create) => {
  let redis: TestRedis;
  let client: Redis;
  let keys: KeyLayout;
  let path: PurchasePath;
  let productId: string;
  let k: ProductKeys;
  let products = 0;

  beforeAll(async () => {
    redis = await startTestRedis();
    client = new Redis(redis.url);
    keys = new KeyLayout(uniquePrefix('free'));
    path = create(client, keys);
  });

  beforeEach(() => {
    productId = `p${++products}`;
    k = keys.product(productId);
  });

  afterAll(async () => {
    if (path) await close(path);
    await closeClient(client);
    await redis?.stop();
  });

  const sale = (stock: number, perUserLimit: number) => resetPlainSale(client, k, stock, perUserLimit);
  const buy = async (userId: string, quantity = 1) => (await path.purchase({ productId, userId, quantity })).remaining;

  it('applies the sale rules in order, changing nothing on a refusal', async () => {
    await expect(buy('u')).rejects.toBeInstanceOf(UnknownProductError);
    await sale(3, 2);
    expect(await buy('ann', 2)).toBe(1);
    await expect(buy('ann', 1)).rejects.toBeInstanceOf(LimitReachedError);
    await expect(buy('bob', 2)).rejects.toBeInstanceOf(InsufficientStockError);
    expect(await buy('bob', 1)).toBe(0);
    await expect(buy('cat', 1)).rejects.toBeInstanceOf(SoldOutError);
    expect(await client.get(k.stock)).toBe('0');
    expect(await client.hgetall(k.buyers)).toEqual({ ann: '2', bob: '1' });
    expect(await client.xlen(k.orders)).toBe(2);
  });

  it('sells exactly the stock to 200 concurrent buyers in 3 processes', async () => {
    await sale(50, 1);
    // Three instances stand for three app processes racing on the same product.
    const processes: PurchasePath[] = [path, create(client, keys), create(client, keys)];
    const outcomes = await Promise.allSettled(
      Array.from({ length: 200 }, (_, i) => processes[i % 3].purchase({ productId, userId: `b${i}`, quantity: 1 })),
    );
    await Promise.all(processes.slice(1).map(close));
    const sold = outcomes.filter((o) => o.status === 'fulfilled').length;
    const refused = outcomes.filter((o) => o.status === 'rejected' && o.reason instanceof SoldOutError).length;
    expect(sold).toBe(50);
    expect(refused).toBe(150);
    expect(await client.get(k.stock)).toBe('0');
    expect(await client.xlen(k.orders)).toBe(50);
    expect(await client.hlen(k.buyers)).toBe(50);
    if (path instanceof OptimisticPurchases) {
      // The retries really happened: EXECs racing across processes were refused and redone.
      const conflicts = processes.reduce((sum, p) => sum + (p as OptimisticPurchases).conflicts, 0);
      expect(conflicts).toBeGreaterThan(0);
    }
  });
});
