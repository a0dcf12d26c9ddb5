import { Redis } from 'ioredis';
import { startPrivateRedis } from '../../harness/redis';
import { useTestRedis } from '../../test/helpers/redis';
import { createRedisClient } from '../redis/create-client';
import { ReleaseSubscriber } from './release-subscriber';

describe('ReleaseSubscriber against a real Redis', () => {
  const { url } = useTestRedis();

  it('joins a second channel while its new connection is still starting up: both subscribe', async () => {
    const base = createRedisClient(url(), 'test');
    const subscribers: ReleaseSubscriber[] = [];
    try {
      await new Promise((resolve) => base.once('ready', resolve));
      let second: Promise<void> | undefined;
      // The connection the strategies give it; the second channel is joined at its
      // 'connect', before it is ready: the moment a contended buyer can hit.
      const rs = new ReleaseSubscriber(() => {
        const connection: Redis = base.duplicate(ReleaseSubscriber.CONNECTION_OPTIONS);
        connection.once('connect', () => {
          second = rs.join('b:released');
        });
        return connection;
      });
      subscribers.push(rs);
      await rs.join('a:released');
      await new Promise<void>((resolve) => setImmediate(resolve));
      expect(second).toBeDefined();
      await expect(second).resolves.toBeUndefined();
    } finally {
      await Promise.all(subscribers.map((s) => s.close()));
      base.disconnect();
    }
  });

  it('a subscription that never answers does not hold a waiter up: it tries again after its waitMs', async () => {
    const redis = await startPrivateRedis();
    const rs = new ReleaseSubscriber(
      () => new Redis(redis.url, { ...ReleaseSubscriber.CONNECTION_OPTIONS, commandTimeout: 1_000 }),
    );
    try {
      // Its connection is up; then the node stops answering (what a shard channel whose
      // slot just moved looked like to the app: its SSUBSCRIBE answered only by the timeout).
      await rs.join('warm:released');
      rs.leave('warm:released');
      process.kill(redis.pid, 'SIGSTOP');
      let tries = 0;
      const started = Date.now();
      const got = await rs.retry('a:released', async () => (++tries < 3 ? { waitMs: 5 } : { got: 'lock' }));
      expect(got).toBe('lock');
      expect(Date.now() - started).toBeLessThan(500);
    } finally {
      process.kill(redis.pid, 'SIGCONT');
      await rs.close();
      await redis.remove();
    }
  });
});
