import { Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { startTestCluster, TestCluster, useTestRedis } from '../../test/helpers/redis';
import { closeRedisClient, createRedisClient, createRedisCluster, whenReady } from './create-client';

describe('createRedisCluster: what it logs', () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await startTestCluster({ masters: 3 });
  }, 60_000);

  afterAll(() => cluster?.stop());

  it('says once, in one line, how many slots changed owner when its slot map refresh finds a slot moved', async () => {
    const log = jest.spyOn(Logger.prototype, 'log').mockImplementation(() => undefined);
    const client = createRedisCluster(
      { nodes: cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })), tls: false },
      'Redis',
    );
    const admins = cluster.nodes.map((n) => new Redis(n.port, '127.0.0.1'));
    try {
      expect(await whenReady(client, 10_000)).toBe(true);
      const slot = 0;
      const source = await cluster.masterOfSlot(slot);
      const target = cluster.nodes.find((n) => n.role === 'master' && n.port !== source.port)!;
      const targetId = await admins[cluster.nodes.indexOf(target)].cluster('MYID');
      // An empty slot moves with SETSLOT NODE alone: the new owner first (it bumps its
      // epoch), then every other master (redis.io, CLUSTER SETSLOT).
      const masters = cluster.nodes.filter((n) => n.role === 'master');
      for (const node of [target, ...masters.filter((n) => n !== target)]) {
        await admins[cluster.nodes.indexOf(node)].cluster('SETSLOT', slot, 'NODE', targetId);
      }
      const said = () => log.mock.calls.map(([message]) => String(message)).filter((m) => m.startsWith('slot map'));
      const deadline = Date.now() + 10_000;
      while (said().length === 0 && Date.now() < deadline) await sleep(50);
      // A second refresh (one a second) finds nothing new.
      await sleep(1_500);
      expect(said()).toEqual([`slot map changed: 1 slot changed owner (now on 127.0.0.1:${target.port})`]);
    } finally {
      await closeRedisClient(client);
      await Promise.all(admins.map((a) => a.quit()));
      log.mockRestore();
    }
  }, 30_000);
});

describe('createRedisClient: what a connection sends', () => {
  const redis = useTestRedis();

  it('nothing Redis refuses: no CLIENT SETINFO, which a least-privilege user may not run (Redis 7.2+) and Redis 7.0 does not know', async () => {
    const admin = redis.client();
    const errors = async () => Number(/total_error_replies:(\d+)/.exec(await admin.info('stats'))?.[1]);
    const before = await errors();
    const client = createRedisClient(redis.url(), 'Redis');
    try {
      expect(await whenReady(client, 5_000)).toBe(true);
      expect(await client.ping()).toBe('PONG');
      expect(await errors()).toBe(before);
    } finally {
      await closeRedisClient(client);
    }
  });
});

describe('createRedisClient: reconnecting', () => {
  it('tries again 50, 100, 150 ... ms after a drop, never more than 2 s apart (ioredis 6 alone doubles up to 5 s)', () => {
    const client = createRedisClient('redis://127.0.0.1:1', 'Redis');
    try {
      const waits = Array.from({ length: 100 }, (_, i) => client.options.retryStrategy!(i + 1));
      expect(waits.slice(0, 3)).toEqual([50, 100, 150]);
      expect(Math.max(...(waits as number[]))).toBe(2_000);
    } finally {
      client.disconnect();
    }
  });
});
