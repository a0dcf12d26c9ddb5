import type { Redis } from 'ioredis';
import { uniquePrefix, useTestRedis } from '../../test/helpers/redis';
import { KeyLayout } from '../redis/key-layout';
import { markWritten } from '../redis/shard-marks';
import { SettlementLag, UNDELIVERED_COUNT_CAP } from './settlement-lag';
import { SETTLE_GROUP } from './settler';

describe('SettlementLag, read from Redis on every scrape', () => {
  const redis = useTestRedis();
  let client: Redis;

  beforeAll(() => {
    client = redis.client();
  });

  it('counts the undelivered entries Redis cannot count (after a deletion) with one bounded read, never the whole stream', async () => {
    const keys = new KeyLayout(uniquePrefix('lag-cap'));
    const stream = keys.product('big').orders;
    await markWritten(client, keys, 'big');
    await client.xgroup('CREATE', stream, SETTLE_GROUP, '0', 'MKSTREAM');
    const entries = UNDELIVERED_COUNT_CAP + 50;
    for (let i = 0; i < entries; i += 1_000) {
      const batch = client.pipeline();
      for (let j = i; j < Math.min(entries, i + 1_000); j++) batch.xadd(stream, '*', 'orderId', `o${j}`);
      await batch.exec();
    }
    // An entry deleted among the undelivered ones: Redis no longer knows the group's lag.
    const some = await client.xrange(stream, '-', '+', 'COUNT', 100);
    await client.xdel(stream, some[99][0]);
    const [group] = (await client.xinfo('GROUPS', stream)) as unknown[][];
    expect(group[group.indexOf('lag') + 1]).toBeNull();

    const [lag] = await new SettlementLag(client, keys).lag();
    expect(lag).toMatchObject({ productId: 'big', unsettled: UNDELIVERED_COUNT_CAP });
    expect(lag.oldestMs).toBeGreaterThanOrEqual(0);
  }, 30_000);

  it('counts a stream without a group (no settler has met it) from its length', async () => {
    const keys = new KeyLayout(uniquePrefix('lag-nogroup'));
    const stream = keys.product('p').orders;
    await markWritten(client, keys, 'p');
    await client.xadd(stream, '*', 'orderId', 'o1');
    await client.xadd(stream, '*', 'orderId', 'o2');
    expect(await new SettlementLag(client, keys).lag()).toEqual([
      { productId: 'p', unsettled: 2, oldestMs: expect.any(Number) },
    ]);
  });

  it('never calls a log it cannot read settled: the error is thrown, so the lag reads as unknown', async () => {
    const keys = new KeyLayout(uniquePrefix('lag-unreadable'));
    await markWritten(client, keys, 'bad');
    // Not a stream: XINFO GROUPS is refused (WRONGTYPE), as a refused command or a shard away would be.
    await client.set(keys.product('bad').orders, 'x');
    await expect(new SettlementLag(client, keys).lag()).rejects.toThrow(/WRONGTYPE/);
  });
});
