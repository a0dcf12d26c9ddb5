import { spawnSync } from 'node:child_process';
import { createServer, Server } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { PrivateCluster, startPrivateCluster } from '../harness/redis';
import { closeClient, startTestCluster, TestCluster, uniquePrefix } from './helpers/redis';
import { startRedis } from '../scripts/redis-server';

const START = join(__dirname, '..', 'scripts', 'start.js');
const SLOTS = 16384;
/** Creating a cluster, with replicas syncing, takes seconds; a failover about two node timeouts. */
const CLUSTER_MS = 60_000;

/** A Cluster client on `clusterNodes` (REDIS_CLUSTER_NODES' form), closed by `close`. */
function clusterClient(clusterNodes: string): Cluster {
  const seeds = clusterNodes.split(',').map((address) => {
    const [host, port] = address.split(':');
    return { host, port: Number(port) };
  });
  // No periodic slot refresh: ioredis' timer can outlive quit() and keep Jest alive.
  return new Cluster(seeds, { slotsRefreshInterval: 0, redisOptions: { maxRetriesPerRequest: 1 } });
}

async function close(client: Cluster | Redis | undefined): Promise<void> {
  if (!client || client.status === 'end') return;
  await client.quit().catch(() => client.disconnect());
}

/** Slot ranges per master, from CLUSTER SLOTS: [start, end, [host, port, id], ...replicas]. */
async function slotsByMaster(client: Cluster): Promise<Map<number, number>> {
  const owned = new Map<number, number>();
  for (const [start, end, ...[[, port]]] of await client.cluster('SLOTS')) {
    owned.set(port, (owned.get(port) ?? 0) + end - start + 1);
  }
  return owned;
}

/** One key per product `p0`, `p1`, ... until three masters own one each, with the master of each. */
async function keysOnEveryMaster(cluster: TestCluster | PrivateCluster, client: Cluster, prefix: string) {
  const byMaster = new Map<number, { key: string; slot: number }>();
  for (let i = 0; byMaster.size < 3; i++) {
    if (i > 100) throw new Error('100 products and still not on three masters');
    const key = `${prefix}{p:p${i}}:stock`;
    const slot = (await client.cluster('KEYSLOT', key)) as number;
    const { port } = await cluster.masterOfSlot(slot);
    if (!byMaster.has(port)) byMaster.set(port, { key, slot });
  }
  return byMaster;
}

describe('a local Redis Cluster (scripts/redis-server.js startCluster)', () => {
  describe('of 3 masters', () => {
    let cluster: TestCluster;
    let client: Cluster;

    beforeAll(async () => {
      cluster = await startTestCluster({ masters: 3 });
      client = clusterClient(cluster.clusterNodes);
    }, CLUSTER_MS);

    afterAll(async () => {
      await close(client);
      await cluster?.stop();
    });

    it('serves all 16384 slots from its 3 masters, which clusterNodes names', async () => {
      expect(cluster.nodes.map((n) => n.role)).toEqual(['master', 'master', 'master']);
      expect(cluster.clusterNodes.split(',')).toEqual(cluster.nodes.map((n) => `127.0.0.1:${n.port}`));
      const owned = await slotsByMaster(client);
      expect([...owned.keys()].sort()).toEqual(cluster.nodes.map((n) => n.port).sort());
      expect([...owned.values()].reduce((a, b) => a + b)).toBe(SLOTS);
      expect((await cluster.masters()).map((n) => n.port).sort()).toEqual(cluster.nodes.map((n) => n.port).sort());
    });

    it('puts keys with different hash tags on different masters, where masterOfSlot says', async () => {
      const byMaster = await keysOnEveryMaster(cluster, client, uniquePrefix('shards'));
      for (const [port, { key }] of byMaster) {
        await client.set(key, `on ${port}`);
        expect(await client.get(key)).toBe(`on ${port}`);
      }
      // Each master holds its own key, and sends a client asking it for another's away.
      for (const [port, { key }] of byMaster) {
        const direct = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 });
        try {
          expect(await direct.get(key)).toBe(`on ${port}`);
          for (const [other, { key: elsewhere, slot }] of byMaster) {
            if (other !== port) await expect(direct.get(elsewhere)).rejects.toThrow(`MOVED ${slot} 127.0.0.1:${other}`);
          }
        } finally {
          await closeClient(direct);
        }
      }
    });

    it(
      'goes to cluster_state:fail while a master without a replica is paused, and back to ok once it resumes',
      async () => {
        const [paused] = cluster.nodes;
        paused.pause();
        try {
          // The others take it for failed after the node timeout: its slots have no master.
          await cluster.waitForState('fail', { timeoutMs: CLUSTER_MS });
        } finally {
          paused.resume();
        }
        await cluster.waitUntilHealthy({ timeoutMs: CLUSTER_MS });
        expect((await cluster.masters()).map((n) => n.port)).toContain(paused.port);
      },
      CLUSTER_MS,
    );
  });

  describe('of 3 masters with a replica each', () => {
    let cluster: TestCluster;
    let client: Cluster;

    beforeAll(async () => {
      cluster = await startTestCluster({ masters: 3, replicas: 1 });
      client = clusterClient(cluster.clusterNodes);
    }, CLUSTER_MS);

    afterAll(async () => {
      await close(client);
      await cluster?.stop();
    });

    it('has six nodes, each master one linked replica, and clusterNodes names the masters', async () => {
      expect(cluster.nodes).toHaveLength(6);
      const masters = cluster.nodes.filter((n) => n.role === 'master');
      expect(masters).toHaveLength(3);
      expect(cluster.clusterNodes.split(',').sort()).toEqual(masters.map((n) => `127.0.0.1:${n.port}`).sort());
      for (const master of masters) {
        const direct = new Redis(master.port, '127.0.0.1');
        try {
          expect(await direct.info('replication')).toMatch(/^connected_slaves:1\r?$/m);
        } finally {
          await closeClient(direct);
        }
      }
      expect([...(await slotsByMaster(client)).values()].reduce((a, b) => a + b)).toBe(SLOTS);
    });

    it(
      'promotes the replica of a killed master and keeps what was replicated',
      async () => {
        const [port, { key, slot }] = [...(await keysOnEveryMaster(cluster, client, uniquePrefix('failover')))][0];
        await client.set(key, 'kept');
        // WAIT: the replica has the write before its master dies (replication is asynchronous).
        const direct = new Redis(port, '127.0.0.1');
        try {
          expect(await direct.wait(1, 5_000)).toBe(1);
        } finally {
          await closeClient(direct);
        }
        const victim = cluster.nodes.find((n) => n.port === port)!;
        victim.kill();
        await victim.exited;
        await cluster.waitUntilHealthy({ timeoutMs: CLUSTER_MS });
        const promoted = await cluster.masterOfSlot(slot);
        expect(promoted.port).not.toBe(port);
        expect(promoted.role).toBe('replica');
        expect((await cluster.masters()).map((n) => n.port)).toContain(promoted.port);
        expect(await client.get(key)).toBe('kept');
      },
      CLUSTER_MS,
    );
  });

  describe('stopped and started again on its folder (as npm start -- --cluster does, .data/cluster/)', () => {
    let first: PrivateCluster;
    let again: PrivateCluster | undefined;
    let client: Cluster | undefined;
    /** A key on each master, written before the stop. */
    let byMaster: Map<number, { key: string; slot: number }>;

    beforeAll(async () => {
      first = await startPrivateCluster({ masters: 3, appendonly: true });
      client = clusterClient(first.clusterNodes);
      byMaster = await keysOnEveryMaster(first, client, uniquePrefix('restart'));
      for (const [port, { key }] of byMaster) await client.set(key, `on ${port}`);
      await close(client);
      await first.stop();
    }, CLUSTER_MS);

    afterAll(async () => {
      await close(client);
      await again?.remove();
      await first?.remove(); // the folder's owner: removes it
    });

    it(
      'comes back on the same ports without a new create, with the data from its AOF',
      async () => {
        again = await startPrivateCluster({ masters: 3, appendonly: true, dir: first.dir });
        expect([first.created, again.created]).toEqual([true, false]);
        expect(again.nodes.map((n) => n.port)).toEqual(first.nodes.map((n) => n.port));
        expect(again.clusterNodes).toBe(first.clusterNodes);
        client = clusterClient(again.clusterNodes);
        for (const [port, { key, slot }] of byMaster) {
          expect((await again.masterOfSlot(slot)).port).toBe(port);
          expect(await client.get(key)).toBe(`on ${port}`);
        }
        await close(client);
        await again.stop();
      },
      CLUSTER_MS,
    );

    it('refuses another layout, naming the saved one and the folder to delete', async () => {
      await expect(startPrivateCluster({ masters: 4, dir: first.dir })).rejects.toThrow(
        `${first.dir} holds a cluster of 3 masters with 0 replicas each, not 4 with 0: start it with that layout, or delete ${first.dir}`,
      );
    });

    it(
      'says which saved port is taken, and leaves no node running',
      async () => {
        const [taken] = first.nodes;
        const squatter: Server = createServer();
        await new Promise<void>((resolve) => squatter.listen(taken.port, '127.0.0.1', resolve));
        try {
          await expect(startPrivateCluster({ masters: 3, dir: first.dir })).rejects.toThrow(
            `cluster node 0 must listen on ports ${taken.port} and `,
          );
        } finally {
          await new Promise((resolve) => squatter.close(resolve));
        }
        // The nodes it did start were stopped: their ports are free again.
        for (const node of first.nodes.slice(1)) {
          const probe = createServer();
          await new Promise<void>((resolve, reject) => {
            probe.once('error', reject);
            probe.listen(node.port, '127.0.0.1', resolve);
          });
          await new Promise((resolve) => probe.close(resolve));
        }
      },
      CLUSTER_MS,
    );
  });
});

describe('npm start -- --cluster N (scripts/start.js)', () => {
  it.each([
    [['--cluster', '0'], '--cluster 0: a Redis Cluster needs at least 3 masters'],
    [['--cluster', '2'], '--cluster 2: a Redis Cluster needs at least 3 masters'],
    [['--cluster', 'x'], '--cluster x: not a whole number'],
    [['--cluster', '3', '--replicas', 'one'], '--replicas one: not a whole number'],
    [
      ['--replicas', '1'],
      "--replicas 1 needs --cluster <masters> (or REDIS_CLUSTER): replicas belong to a cluster's masters",
    ],
    [['--cluster'], "Option '--cluster <value>' argument missing"],
    [['--clusters', '3'], "Unknown option '--clusters'"],
  ])('refuses %j: exit 1, the reason and the usage, before starting anything', (args, message) => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.REDIS_CLUSTER;
    delete env.REDIS_CLUSTER_REPLICAS;
    const run = spawnSync(process.execPath, [START, ...args], { env, encoding: 'utf8', timeout: 60_000 });
    expect(run.status).toBe(1);
    const lines = run.stderr
      .trim()
      .split('\n')
      .filter((l) => !/^\[seckill\] (running on Node|reading \.env)/.test(l));
    expect(lines).toEqual([
      `[seckill] ${message}`,
      '[seckill] usage: npm start -- [--watch] [--cluster <masters, 3 or more> [--replicas <per master>]]',
    ]);
  });

  it('takes REDIS_CLUSTER as --cluster', () => {
    const run = spawnSync(process.execPath, [START], {
      env: { ...process.env, REDIS_CLUSTER: '2' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('REDIS_CLUSTER 2: a Redis Cluster needs at least 3 masters');
  });
});

describe('scripts/redis-server.js startRedis: a server that exits before it is ready', () => {
  // The refusal is composed once the process's output is read to the end ('close'), not
  // at its 'exit', which may come first: then the message lost the line saying why
  // (a CI run failed "says which saved port is taken" on an empty output).
  it('is refused with its own last lines, every time', async () => {
    const squatter: Server = createServer();
    await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
    const port = (squatter.address() as { port: number }).port;
    const dir = mkdtempSync(join(tmpdir(), 'seckill-exits-'));
    try {
      const messages: string[] = [];
      for (let i = 0; i < 20; i++) {
        const starting = startRedis({ dir, port });
        // The server fails and exits while this thread is busy, so its exit and its
        // last output arrive together, as on a loaded machine.
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
        messages.push(
          await starting.then(
            (server: { stop(): Promise<void> }) => server.stop().then(() => 'started'),
            (err: Error) => err.message,
          ),
        );
      }
      expect(messages.filter((m) => !/Address already in use/.test(m))).toEqual([]);
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
