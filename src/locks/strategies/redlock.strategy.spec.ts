import { Redis } from 'ioredis';
import { REDLOCK_NODE } from '../../../harness/redis';
import { setTimeout as sleep } from 'node:timers/promises';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from '../../../test/helpers/redis';
import { LockNodesUnavailableError, LockTimeoutError } from '../../errors/errors';
import { createRedlockNodes, RedlockStrategy } from './redlock.strategy';

/** Node clients connect in the background; wait until a strategy sees them all. */
async function connected(s: RedlockStrategy): Promise<RedlockStrategy> {
  for (;;) {
    const { up, total } = await s.nodes();
    if (up === total) return s;
    await sleep(10);
  }
}

/** Redlock over three real, independent redis-server processes. */
describe('RedlockStrategy (redlock) over 3 nodes', () => {
  let nodes: TestRedis[];
  let admin: Redis[];
  const strategies: RedlockStrategy[] = [];
  let key: string;

  function redlock(ttlMs = 5_000, waitMs = 2_000): RedlockStrategy {
    const s = new RedlockStrategy(
      createRedlockNodes(
        nodes.map((n) => n.url),
        ttlMs,
      ),
      { ttlMs, waitMs },
    );
    strategies.push(s);
    return s;
  }

  beforeEach(async () => {
    nodes = await Promise.all([0, 1, 2].map(() => startTestRedis()));
    admin = nodes.map((n) => new Redis(n.url));
    key = `${uniquePrefix('redlock')}{p:x}:lock`;
  });

  afterEach(async () => {
    await Promise.all(strategies.splice(0).map((s) => s.close()));
    await Promise.all(admin.map(closeClient));
    await Promise.all(nodes.map((n) => n.stop()));
  });

  it('locks on every node and excludes: 30 contenders on 3 instances never overlap', async () => {
    const counter = admin[0];
    const locks = await Promise.all([0, 1, 2].map(() => connected(redlock(5_000, 10_000))));
    const inside = `${key}:inside`;
    let maxInside = 0;
    let seenOnNodes = 0;
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        locks[i % 3].using(key, async () => {
          maxInside = Math.max(maxInside, await counter.incr(inside));
          seenOnNodes = Math.max(
            seenOnNodes,
            (await Promise.all(admin.map((a) => a.exists(key)))).reduce((x, y) => x + y, 0),
          );
          await sleep(1);
          await counter.decr(inside);
        }),
      ),
    );
    expect(maxInside).toBe(1);
    expect(seenOnNodes).toBe(3);
    expect(await Promise.all(admin.map((a) => a.exists(key)))).toEqual([0, 0, 0]);
  });

  it('still locks with one of three nodes down', async () => {
    const lock = await connected(redlock());
    await nodes[2].stop();
    await expect(lock.using(key, async () => 'bought')).resolves.toBe('bought');
    expect((await lock.nodes()).up).toBe(2);
  });

  it('with two of three nodes down, fails at once with a clear quorum error', async () => {
    const lock = await connected(redlock());
    await nodes[1].stop();
    await nodes[2].stop();
    const outcome = lock.using(key, async () => 'bought');
    await expect(outcome).rejects.toBeInstanceOf(LockNodesUnavailableError);
    await expect(outcome).rejects.toThrow('2 of 3 Redlock nodes are unreachable and a lock needs 2');
  });

  it('a minority holding the key (pre-seeded) does not stop a majority lock; a majority does', async () => {
    const lock = await connected(redlock(5_000, 300));
    await admin[0].set(key, 'someone-else', 'PX', 10_000);
    await expect(lock.using(key, async () => 'bought')).resolves.toBe('bought');
    expect(await admin[0].get(key)).toBe('someone-else'); // release never touches another's value
    await admin[1].set(key, 'someone-else', 'PX', 10_000);
    await expect(lock.using(key, async () => 'bought')).rejects.toBeInstanceOf(LockTimeoutError);
  });

  it('a holder that dies lets others in after the TTL', async () => {
    const dying = await connected(redlock(300, 0));
    const held = dying.using(key, () => sleep(60_000, undefined, { ref: false })); // never finishes
    await sleep(50);
    await dying.close(); // its connections are gone; nobody will release
    const other = await connected(redlock(5_000, 3_000));
    await expect(other.using(key, async () => 'bought')).resolves.toBe('bought');
    void held.catch(() => undefined);
  });

  it('one node paused (SIGSTOP): a contender that found the lock held tries again within its wait, not after the hung node', async () => {
    // redlockNodeTimeoutMs(10_000) = 200 ms. A refused attempt learns how many nodes are
    // down only once every vote is in: with the client's 2 s command timeout the hung
    // node held that past the contender's whole wait budget (1.8 s) and it heard
    // LOCK_TIMEOUT although the lock was free again after 300 ms. (Not a 2 s TTL's 40 ms:
    // on a loaded machine a live node's vote took longer, and the lock was refused as
    // two nodes unreachable.)
    const [holder, contender] = await Promise.all([0, 1].map(() => connected(redlock(10_000, 1_800))));
    const pid = Number(/process_id:(\d+)/.exec(await admin[2].info('server'))![1]);
    process.kill(pid, 'SIGSTOP');
    try {
      const order: string[] = [];
      let taken!: () => void;
      const held = new Promise<void>((resolve) => (taken = resolve));
      const first = holder.using(key, async (hold) => {
        taken();
        await sleep(300);
        hold.assertValid();
        order.push('holder');
      });
      await held;
      const second = contender.using(key, async (hold) => {
        hold.assertValid();
        order.push('contender');
      });
      await Promise.all([first, second]);
      expect(order).toEqual(['holder', 'contender']);
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  });
});

/** The nodes as `npm start` and the fault suite start them (REDLOCK_NODE in scripts/redis-server.js). */
describe('Redlock nodes as the launchers start them', () => {
  it('keep a granted lock through a SIGKILL and an immediate restart on the same folder', async () => {
    const key = `${uniquePrefix('redlock-restart')}{p:x}:lock`;
    const nodes = await Promise.all([0, 1, 2].map(() => startTestRedis(REDLOCK_NODE)));
    const admin = nodes.map((n) => new Redis(n.url));
    const lock = new RedlockStrategy(
      createRedlockNodes(
        nodes.map((n) => n.url),
        30_000,
      ),
      { ttlMs: 30_000, waitMs: 2_000 },
    );
    let restarted: TestRedis | undefined;
    try {
      expect(await admin[0].config('GET', 'appendfsync')).toEqual(['appendfsync', 'always']);
      await connected(lock);
      await lock.using(key, async () => {
        const token = await admin[1].get(key);
        expect(token).not.toBeNull();
        // SIGKILL: no shutdown, so nothing is written that was not on disk already.
        nodes[0].kill();
        await nodes[0].exited;
        restarted = await startTestRedis({ ...REDLOCK_NODE, port: nodes[0].port, dir: nodes[0].dir });
        const back = new Redis(restarted.url);
        admin.push(back);
        // Still granted to us: node 1 cannot grant it to anyone else while we hold it.
        expect(await back.get(key)).toBe(token);
        expect(await back.pttl(key)).toBeGreaterThan(0);
      });
      // Every connection back on the restarted node, so all of them close cleanly.
      await connected(lock);
      await admin[0].ping();
    } finally {
      await lock.close();
      await Promise.all(admin.map(closeClient));
      await restarted?.stop();
      await Promise.all(nodes.map((n) => n.stop()));
    }
  });
});
