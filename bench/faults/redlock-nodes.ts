import { health, startSale } from '../../harness/http';
import { PrivateRedis, REDLOCK_NODE, startPrivateRedis } from '../../harness/redis';
import { CONFIG_DEFAULTS } from '../../src/config/app-config';
import { redlockNodeTimeoutMs } from '../../src/locks/strategies/redlock.strategy';
import { KeyLayout } from '../../src/redis/key-layout';

/** The apps' LOCK_TTL_MS (not set here: the default). */
const DEFAULT_TTL_MS = CONFIG_DEFAULTS.lockTtlMs;
import { runLoad } from '../load';
import {
  answered,
  apps,
  codesSeen,
  Context,
  goneApps,
  onPrivateRedis,
  n,
  Outcome,
  PREFIX,
  Size,
  timeline,
  TOKEN,
  verdict,
  waitUntil,
} from './kit';

/** Redlock over three nodes: one paused under two contending apps, one killed mid-sale, then two down, then both back. */
export async function redlockNodes(ctx: Context): Promise<Outcome[]> {
  return onPrivateRedis(async ({ redis, client, clock }) => {
    const size: Size = ctx.quick
      ? { buyers: 3_000, stock: 400, connections: 50 }
      : { buyers: 10_000, stock: 1_500, connections: 100 };
    // As `npm start` runs them: AOF with appendfsync always, so a node restarted on its
    // folder still holds the locks it granted (REDLOCK_NODE says why).
    const nodes: PrivateRedis[] = await Promise.all([0, 1, 2].map(() => startPrivateRedis(REDLOCK_NODE)));
    const keys = new KeyLayout(PREFIX);
    const outcomes: Outcome[] = [];
    const load = (url: string, productId: string, buyers: number, userPrefix?: string) =>
      runLoad({ url, productId, buyers, duplicates: 0, connections: size.connections, quantity: 1, userPrefix });
    const [app, other] = await apps(2, 'redlock', redis.url, { REDLOCK_URLS: nodes.map((x) => x.url).join(',') });

    // 0. One node paused (SIGSTOP: it holds its connections and answers nothing) while
    // two apps contend for the lock. The package resolves an attempt at a quorum, but a
    // refused attempt learns how many nodes are down only once every vote is in: each
    // waits for the hung node, at most its node timeout, not the 2 s command timeout.
    const k0 = keys.product('node-paused');
    await startSale(app.url, TOKEN, 'node-paused', size.stock, 1);
    const half = Math.floor(size.buyers / 2);
    const load0 = [load(app.url, 'node-paused', half, 'a-'), load(other.url, 'node-paused', half, 'b-')];
    await waitUntil(
      'a quarter of the stock to sell',
      async () => Number(await client.get(k0.stock)) <= size.stock * 0.75,
    );
    const soldAtPause = size.stock - Number(await client.get(k0.stock));
    process.kill(nodes[2].pid, 'SIGSTOP');
    timeline(
      'node 3 paused',
      `SIGSTOP after ${n(soldAtPause)} sold: it answers nothing; two apps contend on the other two`,
    );
    let loads0;
    try {
      loads0 = await Promise.all(load0);
    } finally {
      process.kill(nodes[2].pid, 'SIGCONT');
    }
    timeline(
      'node 3 resumed',
      `SIGCONT once the first sale was over (${n(answered(loads0[0]) + answered(loads0[1]))} answers in all)`,
    );
    const v0 = await verdict(client, k0, loads0, [], [], { history: { start: clock } });
    outcomes.push({
      name: 'redlock: one of three nodes paused, 2 apps',
      ...v0,
      problems: [...v0.problems, ...goneApps([app, other])],
      story:
        `SIGSTOP node 3 after ${n(soldAtPause)} sold, two apps contending: the other two kept granting the lock, ` +
        `and an attempt the lock refused waited for the hung node at most ${redlockNodeTimeoutMs(DEFAULT_TTL_MS)} ms ` +
        `(its node timeout), not the 2,000 ms command timeout; slowest answer ${n(v0.load.latency.max)} ms`,
    });

    // 1. One node killed mid-sale: a majority (2 of 3) still grants the lock.
    const k1 = keys.product('one-down');
    await startSale(app.url, TOKEN, 'one-down', size.stock, 1);
    const load1 = load(app.url, 'one-down', size.buyers);
    await waitUntil(
      'a quarter of the stock to sell',
      async () => Number(await client.get(k1.stock)) <= size.stock * 0.75,
    );
    const soldAtKill = size.stock - Number(await client.get(k1.stock));
    nodes[0].kill();
    timeline('node 1 killed', `SIGKILL mid-sale after ${n(soldAtKill)} sold: 2 of 3 nodes, still a quorum`);
    const v1 = await verdict(client, k1, [await load1], [], [], { history: { start: clock } });
    outcomes.push({
      name: 'redlock: one of three nodes killed mid-sale',
      ...v1,
      story: `SIGKILL node 1 after ${n(soldAtKill)} sold; the other two kept granting the lock`,
    });

    // 2. Two nodes down: no quorum, nothing sold, every buyer told 503 at once.
    nodes[1].kill();
    await waitUntil('/health to say 503', async () => (await health(app.url)).http === 503);
    timeline('node 2 killed: no quorum', 'SIGKILL: 1 of 3 nodes left, the app reports itself unhealthy (503)');
    const k2 = keys.product('two-down');
    await startSale(app.url, TOKEN, 'two-down', size.stock, 1).catch(() => undefined); // needs the lock too: refused
    await client.hset(k2.meta, 'initialStock', size.stock, 'perUserLimit', 1);
    await client.set(k2.stock, size.stock);
    const load2 = await load(app.url, 'two-down', Math.min(size.buyers, 1_000));
    const v2 = await verdict(client, k2, [load2], [], ['LOCK_NODES_UNAVAILABLE'], {
      soldOut: false,
      maxAnswerMs: 6_000,
      history: { start: clock },
    });
    if (v2.sold !== 0) v2.problems.push(`${v2.sold} sold without a quorum`);
    if ((load2.codes.LOCK_NODES_UNAVAILABLE ?? 0) !== load2.sent)
      v2.problems.push('not every buyer got 503 LOCK_NODES_UNAVAILABLE');
    outcomes.push({
      name: 'redlock: two of three nodes down',
      ...v2,
      story: `SIGKILL node 2 too: ${codesSeen(load2, ['LOCK_NODES_UNAVAILABLE'])}, slowest answer ${n(load2.latency.max)} ms`,
    });

    // 3. Both back on their ports and data folders: sales resume, without restarting the app.
    for (const i of [0, 1]) {
      await nodes[i].exited;
      nodes[i] = await startPrivateRedis({ ...REDLOCK_NODE, port: nodes[i].port, dir: nodes[i].dir });
    }
    await waitUntil('/health to say 200', async () => (await health(app.url)).http === 200);
    timeline(
      'nodes back',
      `nodes 1 and 2 restarted on their ports and folders: ${codesSeen(load2, ['LOCK_NODES_UNAVAILABLE'])} while down; sales resume`,
    );
    const load3 = await load(app.url, 'two-down', size.buyers, 'back-');
    const v3 = await verdict(client, k2, [load2, load3], [], ['LOCK_NODES_UNAVAILABLE'], {
      history: { start: clock },
    });
    outcomes.push({
      name: 'redlock: nodes back',
      ...v3,
      load: load3,
      story: 'restarted nodes 1 and 2 on their ports; the same sale sold out',
    });
    return outcomes;
  });
}
