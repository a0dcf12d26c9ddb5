import { setTimeout as sleep } from 'node:timers/promises';
import { Cluster, Redis, ReplyError } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { startTestCluster, TestCluster } from '../../test/helpers/redis';
import { closeRedisClient, createRedisCluster, whenReady } from './create-client';
import { notRun, resendingUntil } from './unrun-retry';

describe('notRun: the replies by which a node says it ran nothing', () => {
  it('names MOVED, ASK, TRYAGAIN and CLUSTERDOWN, alone, as the last of too many redirections, or inside an EXECABORT', () => {
    expect(notRun(new ReplyError('MOVED 3593 127.0.0.1:7001'))).toBe('MOVED');
    expect(notRun(new ReplyError('ASK 3593 127.0.0.1:7001'))).toBe('ASK');
    expect(notRun(new ReplyError('TRYAGAIN Multiple keys request during rehashing of slot'))).toBe('TRYAGAIN');
    expect(notRun(new ReplyError('CLUSTERDOWN The cluster is down'))).toBe('CLUSTERDOWN');
    expect(notRun(new Error('Too many Cluster redirections. Last error: ReplyError: TRYAGAIN Multiple keys'))).toBe(
      'TRYAGAIN',
    );
    const aborted = Object.assign(new ReplyError('EXECABORT Transaction discarded because of previous errors.'), {
      previousErrors: [new ReplyError('ASK 3593 127.0.0.1:7001')],
    });
    expect(notRun(aborted)).toBe('ASK');
  });

  it('names nothing else: a write with no reply, a refusal, a script error, an EXECABORT for another reason', () => {
    expect(notRun(new Error('Command timed out'))).toBeNull();
    expect(notRun(new Error('Connection is closed.'))).toBeNull();
    expect(notRun(new ReplyError('OOM command not allowed'))).toBeNull();
    expect(notRun(new ReplyError('ERR user_script:1: oops'))).toBeNull();
    const aborted = Object.assign(new ReplyError('EXECABORT Transaction discarded because of previous errors.'), {
      previousErrors: [new ReplyError('ASK 1 x:1'), new ReplyError('OOM command not allowed')],
    });
    expect(notRun(aborted)).toBeNull();
  });
});

describe('resendingNotRun on a real cluster whose slot is moving', () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await startTestCluster({ masters: 3 });
  }, 60_000);

  afterAll(() => cluster?.stop());

  /**
   * Two keys of one slot, one of them already MIGRATEd to another master: GETs of both
   * in one tick leave in one auto-pipelined batch to the source, whose replies differ
   * (a value, and ASK for the key that left), and ioredis hands the ASK to its caller.
   */
  async function splitSlot() {
    const moved = `{unrun}:${Math.random()}:a`;
    const stayed = moved.replace(/:a$/, ':b');
    const slot = calculateSlot(moved);
    const source = await cluster.masterOfSlot(slot);
    const target = (await cluster.masters()).find((m) => m.port !== source.port)!;
    const from = new Redis(source.port, '127.0.0.1');
    const to = new Redis(target.port, '127.0.0.1');
    const others = (await cluster.masters())
      .filter((m) => m.port !== source.port && m.port !== target.port)
      .map((m) => new Redis(m.port, '127.0.0.1'));
    await from.mset(moved, 'A', stayed, 'B');
    const [sourceId, targetId] = [await from.cluster('MYID'), await to.cluster('MYID')];
    await to.cluster('SETSLOT', slot, 'IMPORTING', String(sourceId));
    await from.cluster('SETSLOT', slot, 'MIGRATING', String(targetId));
    await from.call('MIGRATE', '127.0.0.1', String(target.port), '', '0', '5000', 'KEYS', moved);
    const finish = async () => {
      // Every key of the slot still on the source: `stayed`, and an earlier test's pair
      // when the slot came here with them (SETSLOT NODE refuses while the source holds any).
      const rest = (await from.cluster('GETKEYSINSLOT', slot, 1000)) as string[];
      if (rest.length > 0) {
        await from.call('MIGRATE', '127.0.0.1', String(target.port), '', '0', '5000', 'KEYS', ...rest);
      }
      for (const c of [to, from, ...others]) await c.cluster('SETSLOT', slot, 'NODE', String(targetId));
    };
    const close = () => Promise.all([from, to, ...others].map((c) => c.quit()));
    return { moved, stayed, finish, close };
  }

  function rawCluster(): Cluster {
    return new Cluster(
      cluster.nodes.filter((n) => n.role === 'master').map((n) => ({ host: '127.0.0.1', port: n.port })),
      { enableAutoPipelining: true, slotsRefreshInterval: 0 },
    );
  }

  function appCluster(): Cluster {
    return createRedisCluster(
      {
        nodes: cluster.nodes.filter((n) => n.role === 'master').map((n) => ({ host: '127.0.0.1', port: n.port })),
        tls: false,
      },
      'Redis',
    );
  }

  /** Both keys at once: a script that reads two keys of the split slot hears TRYAGAIN until the move completes. */
  const BOTH = "return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2])}";

  it('ioredis alone: an auto-pipelined read of a key still on the source answers nil (it resends the batch to the ASK target), and a script gives up after its redirections while the move lasts', async () => {
    const split = await splitSlot();
    const raw = rawCluster();
    try {
      await raw.get(split.stayed); // the slot map is known
      const [, stayed] = await Promise.allSettled([raw.get(split.moved), raw.get(split.stayed)]);
      expect(stayed).toEqual({ status: 'fulfilled', value: null }); // 'B' is on the source
      // While the move does not finish, it follows TRYAGAIN maxRedirections times, then gives up.
      await expect(raw.eval(BOTH, 2, split.moved, split.stayed)).rejects.toThrow(/TRYAGAIN/);
    } finally {
      raw.disconnect();
      await split.finish();
      await split.close();
    }
  });

  it("the app's client: every key reads as it is while the slot is split, and the script is sent again until the move completes", async () => {
    const split = await splitSlot();
    const client = appCluster();
    try {
      expect(await whenReady(client, 10_000)).toBe(true);
      expect(await Promise.all([client.get(split.moved), client.get(split.stayed)])).toEqual(['A', 'B']);
      // A MULTI and a script that need both keys on one node hear TRYAGAIN while they are
      // split: each is sent again until the move completes (ioredis alone gives up).
      const transaction = client.multi().get(split.moved).get(split.stayed).exec();
      const script = client.eval(BOTH, 2, split.moved, split.stayed);
      await sleep(1_000);
      await split.finish();
      expect(await transaction).toEqual([
        [null, 'A'],
        [null, 'B'],
      ]);
      expect(await script).toEqual(['A', 'B']);
      expect(client instanceof Cluster).toBe(true);
    } finally {
      await closeRedisClient(client);
      await split.finish().catch(() => undefined);
      await split.close();
    }
  });

  it('sends nothing again past the deadline its caller set (a lock section passes its lease validity)', async () => {
    const split = await splitSlot();
    const client = appCluster();
    try {
      expect(await whenReady(client, 10_000)).toBe(true);
      const by = performance.now() + 300;
      await expect(resendingUntil(by, () => client.eval(BOTH, 2, split.moved, split.stayed))).rejects.toThrow(
        /TRYAGAIN|MOVED|ASK/,
      );
      // Given up at the deadline, not at the 2 s budget (nor after the move, which never finished meanwhile).
      expect(performance.now() - by).toBeLessThan(1_500);
    } finally {
      await closeRedisClient(client);
      await split.finish().catch(() => undefined);
      await split.close();
    }
  });
});
