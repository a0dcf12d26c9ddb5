import calculateSlot from 'cluster-key-slot';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ClusterNode } from '../harness/redis';
import { KeyLayout } from '../src/redis/key-layout';
import { clusterClient, readSlotMap, startTestCluster, TestCluster, uniquePrefix } from './helpers/redis';

/**
 * Review of 1fce76e (keepNodesWithCommandsInFlight, UNSENT): what a node kept in the pool
 * for its commands in flight, and a command sent again after ioredis refused it, do
 * when the node is not a master handing over gracefully. Real redis-servers, held by
 * CLIENT PAUSE or SIGSTOP, never raced.
 */
describe('cluster client after 1fce76e: three masters with a replica each', () => {
  let cluster: TestCluster;
  let products: string[];
  let keys: KeyLayout;

  beforeAll(async () => {
    cluster = await startTestCluster({ masters: 3, replicas: 1 });
    keys = new KeyLayout(uniquePrefix('review'));
    const admin = new Redis(cluster.nodes[0].url);
    try {
      products = (await readSlotMap(admin)).productsOnEveryShard(keys);
    } finally {
      await admin.quit();
    }
  }, 60_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  /** The replica of the master on `port`, by its INFO replication. */
  async function replicaOf(port: number): Promise<ClusterNode> {
    for (const node of cluster.nodes.filter((n) => n.port !== port)) {
      const admin = new Redis(node.url);
      const info = await admin.info('replication').finally(() => admin.quit());
      if (new RegExp(`^master_port:${port}\\r?$`, 'm').test(info)) return node;
    }
    throw new Error(`:${port} has no replica`);
  }

  it('a write that timed out (OUTCOME_UNKNOWN) while a failing-over master held it is not run later on the new master', async () => {
    const key = keys.product(products[0]).stock;
    const slot = calculateSlot(key);
    const master = await cluster.masterOfSlot(slot);
    const replica = await replicaOf(master.port);
    const own = await clusterClient(cluster);
    const from = new Redis(master.url);
    const to = new Redis(replica.url);
    try {
      await own.set(key, '0');
      // The old master holds the write past COMMAND_TIMEOUT_MS (a graceful failover may
      // hold writes for up to twice CLUSTER_MF_TIMEOUT, 10 s).
      await from.client('PAUSE', '30000', 'WRITE');
      const write = own.incr(key).then(String, (err: Error) => `error: ${err.message}`);
      await until('the write to wait on the paused master', async () =>
        /flags=b\b.*cmd=incr\b/.test(String(await from.client('LIST'))) ? true : undefined,
      );
      // The caller has its answer: the write's outcome is unknown.
      expect(await write).toBe('error: Command timed out');
      await to.cluster('FAILOVER', 'TAKEOVER');
      await until('the slot map to name the replica as the master', async () =>
        (await cluster.masterOfSlot(slot)).port === replica.port ? true : undefined,
      );
      const refreshed = new Promise((resolve) => own.once('refresh', resolve));
      own.refreshSlotsCache();
      await refreshed;
      await until(
        'the app to be connected to the new master',
        async () =>
          own.nodes('master').some((n) => n.options.port === replica.port && n.status === 'ready') || undefined,
      );
      // The old master answers the held write MOVED. Its caller was answered 2 s ago, but
      // ioredis follows the redirection of a command already rejected by its timeout, on
      // the old master's connection the pool kept for it (its commandQueue is not empty).
      await from.client('UNPAUSE');
      await sleep(1_000);
      expect(await to.get(key)).toBe('0');
    } finally {
      await from.client('UNPAUSE').catch(() => undefined);
      await Promise.all([from.quit(), to.quit(), own.quit().catch(() => own.disconnect())]);
    }
  }, 60_000);

  it('a master paused (SIGSTOP) whose replica took over leaves the pool once it serves no slot: the client quits at once', async () => {
    const key = keys.product(products[1]).stock;
    const slot = calculateSlot(key);
    const master = await cluster.masterOfSlot(slot);
    const replica = await replicaOf(master.port);
    const own = await clusterClient(cluster);
    const to = new Redis(replica.url);
    try {
      await own.set(key, '0');
      master.pause();
      // A buyer's write meets the stopped node: it times out (OUTCOME_UNKNOWN), as it did before.
      expect(await own.incr(key).then(String, (err: Error) => `error: ${err.message}`)).toBe(
        'error: Command timed out',
      );
      await to.cluster('FAILOVER', 'TAKEOVER');
      await until('the slot map to name the replica as the master', async () =>
        (await cluster.masterOfSlot(slot)).port === replica.port ? true : undefined,
      );
      // Two refreshes of the app's own (every SLOTS_REFRESH_MS): the stopped node serves no
      // slot. Its timed-out INCR stays in its commandQueue until it answers, so the pool
      // keeps it for as long as it is stopped; quit() then waits on its QUIT for
      // COMMAND_TIMEOUT_MS and rejects, and each refresh that asks it first waits 1 s.
      for (let i = 0; i < 2; i++) await new Promise((resolve) => own.once('refresh', resolve));
      const pooled = own.nodes('all').map((n) => n.options.port);
      const started = performance.now();
      const quit = await own.quit().then(String, (err: Error) => `error: ${err.message}`);
      const tookMs = performance.now() - started;
      expect({ pooled: pooled.includes(master.port), quit, slow: tookMs > 1_000 }).toEqual({
        pooled: false,
        quit: 'OK',
        slow: false,
      });
    } finally {
      master.resume();
      own.disconnect();
      await to.quit();
    }
  }, 60_000);
});

describe('cluster client after 1fce76e: a master killed, no replica to take over', () => {
  let cluster: TestCluster;
  afterAll(async () => {
    await cluster?.stop();
  });

  it("a command for a dead master's slot fails at once (503), not after NOT_RUN_BUDGET_MS of resends", async () => {
    // No replicas and a long node timeout: the slot stays the dead master's for the whole test.
    cluster = await startTestCluster({ masters: 3, nodeTimeoutMs: 60_000 });
    const keys = new KeyLayout(uniquePrefix('dead'));
    const admin = new Redis(cluster.nodes[0].url);
    const map = await readSlotMap(admin).finally(() => admin.quit());
    const victimAddress = map.masters.find((m) => m !== `127.0.0.1:${cluster.nodes[0].port}`)!;
    const victim = cluster.nodes.find((n) => `127.0.0.1:${n.port}` === victimAddress)!;
    const id = map
      .productsOnEveryShard(keys)
      .find((p) => map.masterOfSlot(calculateSlot(keys.product(p).stock)) === victimAddress)!;
    const key = keys.product(id).stock;
    const own = await clusterClient(cluster);
    try {
      victim.kill();
      await victim.exited;
      await until(
        'the app to see the dead master go',
        async () => own.nodes('all').every((n) => n.options.port !== victim.port || n.status !== 'ready') || undefined,
      );
      // ioredis refuses the command ("Connection is closed.", from tryConnection): the
      // dead master's connection, made anew on every refresh and MOVED, is connecting.
      // Sent again until it is up, it waits the whole budget for a node that never is.
      const started = performance.now();
      const answer = await own.get(key).then(String, (err: Error) => `error: ${err.message}`);
      const tookMs = Math.round(performance.now() - started);
      expect(answer).toBe('error: Connection is closed.');
      expect(tookMs).toBeLessThan(500);
    } finally {
      own.disconnect();
    }
  }, 60_000);
});

/** Polls `probe` until it returns a value, at most 30 s. */
async function until<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await sleep(50);
  }
}
