import { Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { startPrivateCluster, startPrivateRedis } from '../../harness/redis';
import { clusterReady, useTestRedis } from '../../test/helpers/redis';
import { createRedisClient, createRedisCluster } from '../redis/create-client';
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

  it('on a cluster, a shard subscriber that cannot reach its failed master does not kill the process', async () => {
    const cluster = await startPrivateCluster({ masters: 3 });
    const crashes: unknown[] = [];
    const crash = (err: unknown) => crashes.push(err);
    process.on('uncaughtException', crash);
    process.on('unhandledRejection', crash);
    const nodes = cluster.clusterNodes.split(',').map((a) => ({ host: '127.0.0.1', port: Number(a.split(':')[1]) }));
    const client = createRedisCluster({ nodes, tls: false }, 'test');
    client.on('error', () => undefined);
    const rs = ReleaseSubscriber.of(client);
    try {
      // Every master's connection up, not only the slot map: the one killed below is then
      // a master the client knew, whatever the machine's load.
      await clusterReady(client);
      const channel = 'c:{p:phone}:lock:released';
      // Its master dies before anyone subscribed there: the shard subscriber's connect fails.
      (await cluster.masterOfSlot(calculateSlot(channel))).kill();
      const got = await rs.retry(channel, async () => ({ got: 'no message needed' }));
      expect(got).toBe('no message needed');
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(crashes).toEqual([]);
    } finally {
      process.off('uncaughtException', crash);
      process.off('unhandledRejection', crash);
      await rs.close();
      client.disconnect();
      await cluster.remove();
    }
  }, 60_000);
});
