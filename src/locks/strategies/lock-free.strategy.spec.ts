import { Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from '../../../test/helpers/redis';
import { InsufficientStockError, LimitReachedError, SoldOutError, UnknownProductError } from '../../errors/domain-errors';
import { KeyLayout, ProductKeys } from '../../redis/key-layout';
import { defineScripts } from '../../redis/redis-scripts';
import { LockFreeStrategy } from '../lock-strategy';
import { AtomicStrategy } from './atomic.strategy';
import { OptimisticStrategy } from './optimistic.strategy';

describe.each([
  ['atomic', (redis: Redis) => new AtomicStrategy(redis)],
  ['optimistic', (redis: Redis) => new OptimisticStrategy(redis, 10_000)],
] as const)('%s (lock-free) against a real Redis', (_name, create) => {
  let redis: TestRedis;
  let client: Redis;
  let strategy: LockFreeStrategy;
  let k: ProductKeys;

  beforeAll(async () => {
    redis = await startTestRedis();
    client = new Redis(redis.url);
    defineScripts(client);
    strategy = create(client);
  });

  beforeEach(async () => {
    k = new KeyLayout(uniquePrefix('free')).product('p');
  });

  afterAll(async () => {
    await strategy?.close?.();
    await closeClient(client);
    await redis?.stop();
  });

  const sale = (stock: number, perUserLimit: number) => client.resetSale(k.meta, k.stock, k.buyers, k.orders, stock, perUserLimit);
  const buy = (userId: string, quantity = 1) => strategy.purchase(k, { productId: 'p', userId, quantity }, randomUUID());

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
    const processes: LockFreeStrategy[] = [strategy, create(client), create(client)];
    const outcomes = await Promise.allSettled(
      Array.from({ length: 200 }, (_, i) =>
        processes[i % 3].purchase(k, { productId: 'p', userId: `b${i}`, quantity: 1 }, randomUUID()),
      ),
    );
    await Promise.all(processes.slice(1).map((p) => p.close?.()));
    const sold = outcomes.filter((o) => o.status === 'fulfilled').length;
    const refused = outcomes.filter((o) => o.status === 'rejected' && o.reason instanceof SoldOutError).length;
    expect(sold).toBe(50);
    expect(refused).toBe(150);
    expect(await client.get(k.stock)).toBe('0');
    expect(await client.xlen(k.orders)).toBe(50);
    expect(await client.hlen(k.buyers)).toBe(50);
    if (strategy instanceof OptimisticStrategy) {
      // The retries really happened: EXECs racing across processes were refused and redone.
      const conflicts = processes.reduce((sum, p) => sum + (p as OptimisticStrategy).conflicts, 0);
      expect(conflicts).toBeGreaterThan(0);
    }
  });
});
