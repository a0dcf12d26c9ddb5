import { ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { useTestRedis } from '../test/helpers/redis';
import { childrenOf, costOf, sampleRedis, startMeter } from './cost';

/**
 * A process and the child it forked, as a node:cluster primary and its worker: the
 * parent prints the child's pid; on a line on stdin the child does a fixed amount of
 * work while the parent waits, then the parent prints "done".
 */
const TREE = `
const burn = () => { let x = 0; for (let i = 0; i < 3e8; i++) x += i % 7; return x; };
if (process.send) {
  process.on('message', () => { burn(); process.send('done'); });
} else {
  const child = require('node:child_process').fork(__filename);
  console.log(child.pid);
  process.stdin.once('data', () => {
    child.send('go');
    // Both stay up, idle, until the test kills them: a child that exits while the two
    // meters read it spends a tick between their reads (once 710 ms against 720).
    child.once('message', () => console.log('done'));
  });
}
`;

describe('cost of a pass', () => {
  const redis = useTestRedis();

  it('counts every command Redis ran between two samples, a script and the commands it ran included, its INFO not', async () => {
    const client = redis.client();
    const before = await sampleRedis(client);
    for (let i = 0; i < 10; i++) await client.set(`cost:k${i}`, i);
    await client.eval("redis.call('incr', KEYS[1]); return redis.call('incr', KEYS[1])", 1, 'cost:n');
    const cost = costOf(11, 2, null, [{ node: 'one', before, after: await sampleRedis(client) }]);
    expect(cost.measured.redisCommands).toEqual({ set: 10, eval: 1, incr: 2 });
    expect(cost.redisCommandsPerSale).toBe(6.5);
    expect(cost.redisCpuUsPerRequest).toBeGreaterThan(0);
    expect(cost.salesPerSecCeiling).toBe(Math.round(1e6 / cost.redisCpuUsPerSale!));
    expect(cost.appCpuUsPerRequest).toBeNull();
    // One node: it has all of it.
    expect(cost.shards).toEqual([
      {
        node: 'one',
        cpuUs: expect.any(Number),
        cpuUsPerSale: cost.redisCpuUsPerSale,
        commands: 13,
        commandsPerSale: 6.5,
        share: 1,
      },
    ]);
    expect(Math.round(cost.shards[0].cpuUs / 100) / 10).toBe(cost.measured.redisCpuMs);
    // Nothing sold: no per-sale figures, rather than a division by zero.
    expect(costOf(11, 0, 5, [{ node: 'one', before, after: before }])).toMatchObject({
      appCpuUsPerRequest: 454.5,
      redisCpuUsPerSale: null,
      redisCommandsPerSale: null,
      salesPerSecCeiling: null,
      shards: [{ node: 'one', cpuUs: 0, cpuUsPerSale: null, commands: 0, commandsPerSale: null, share: 1 }],
    });
  });

  it('sums several nodes into the totals and gives each its part: CPU, commands, share of the CPU', () => {
    const sample = (cpuUs: number, calls: Record<string, number>) => ({ cpuUs, calls });
    const cost = costOf(100, 10, null, [
      { node: 'a:1', before: sample(1_000, { evalsha: 5 }), after: sample(4_000, { evalsha: 35, get: 2 }) },
      { node: 'b:2', before: sample(500, {}), after: sample(1_500, { evalsha: 10 }) },
      { node: 'c:3', before: sample(0, { get: 1 }), after: sample(0, { get: 1 }) },
    ]);
    expect(cost).toMatchObject({
      redisCpuUsPerRequest: 40,
      redisCpuUsPerSale: 400,
      redisCommandsPerSale: 4.2,
      salesPerSecCeiling: 2_500,
      measured: { redisCpuMs: 4, redisCommands: { evalsha: 40, get: 2 } },
    });
    expect(cost.shards).toEqual([
      { node: 'a:1', cpuUs: 3_000, cpuUsPerSale: 300, commands: 32, commandsPerSale: 3.2, share: 0.75 },
      { node: 'b:2', cpuUs: 1_000, cpuUsPerSale: 100, commands: 10, commandsPerSale: 1, share: 0.25 },
      { node: 'c:3', cpuUs: 0, cpuUsPerSale: 0, commands: 0, commandsPerSale: 0, share: 0 },
    ]);
  });

  const linux = process.platform === 'linux' ? it : it.skip;
  linux("adds the CPU time of the app's forked children (node:cluster workers) to its own", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'seckill-cost-'));
    const script = join(dir, 'tree.js');
    writeFileSync(script, TREE);
    let parent: ChildProcess | undefined;
    try {
      parent = spawn(process.execPath, [script], { stdio: ['pipe', 'pipe', 'inherit'] });
      const lines = createInterface({ input: parent.stdout! })[Symbol.asyncIterator]();
      const child = Number((await lines.next()).value);
      expect(childrenOf(parent.pid!)).toEqual([child]);

      const client = redis.client();
      const nodes = [{ name: 'one', client }];
      const [tree, childAlone] = await Promise.all([startMeter(nodes, parent.pid!), startMeter(nodes, child)]);
      parent.stdin!.write('go\n');
      expect((await lines.next()).value).toBe('done');
      // The child is idle again: both read the same ticks of it at the end.
      const [whole, part] = await Promise.all([tree, childAlone].map((m) => m.stop(1, async () => 0)));
      expect(part.measured.appCpuMs).toBeGreaterThan(0);
      // The parent only waited: the tree's CPU is the child's, counted in it.
      expect(whole.measured.appCpuMs).toBeGreaterThanOrEqual(part.measured.appCpuMs!);
      expect(Number.isFinite(whole.appCpuUsPerRequest)).toBe(true);
    } finally {
      if (parent && parent.exitCode === null) {
        parent.kill('SIGKILL');
        await once(parent, 'exit');
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
