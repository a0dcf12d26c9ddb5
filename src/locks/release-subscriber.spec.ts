import type { Redis } from 'ioredis';
import { useTestRedis } from '../../test/helpers/redis';
import { createRedisClient } from '../redis/create-client';
import { ReleaseSubscriber } from './release-subscriber';

describe('ReleaseSubscriber against a real Redis', () => {
  const { url, client } = useTestRedis();

  it('sends SSUBSCRIBE again on the next join after one failed, and then wakes its waiters', async () => {
    // A user that may not use the channel yet: Redis refuses the SSUBSCRIBE (NOPERM).
    const admin = client();
    await admin.acl('SETUSER', 'waiter', 'on', '>pw', '~*', '+@all', 'resetchannels');
    const base = createRedisClient(url().replace('redis://', 'redis://waiter:pw@'), 'test');
    const rs = ReleaseSubscriber.of(base);
    try {
      await expect(rs.join('c:released')).rejects.toThrow(/NOPERM/);
      await admin.acl('SETUSER', 'waiter', 'allchannels');
      await rs.join('c:released');
      const woken = rs.wait('c:released', rs.generation('c:released'), 600_000);
      expect(await admin.spublish('c:released', 'released')).toBe(1);
      await woken;
      expect(rs.wakeups).toBe(1);
    } finally {
      await rs.close();
      base.disconnect();
      await admin.acl('DELUSER', 'waiter');
    }
  });

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
});
