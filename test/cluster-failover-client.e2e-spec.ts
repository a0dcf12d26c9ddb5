import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { KeyLayout } from '../src/redis/key-layout';
import {
  clusterClient,
  failoverPair,
  readSlotMap,
  relearnedMap,
  startTestCluster,
  takeOver,
  TestCluster,
  uniquePrefix,
  until,
} from './helpers/redis';

/**
 * The cluster client's node connections (src/redis/node-pool.ts) and its commands sent
 * again after ioredis refused them (UNSENT, src/redis/unrun-retry.ts), where the node is
 * not a master handing over gracefully: a write that timed out, a master paused, a master
 * killed. Real redis-servers, held by CLIENT PAUSE or SIGSTOP, never raced.
 */
describe('the cluster client through failovers: three masters with a replica each', () => {
  let cluster: TestCluster;
  let products: string[];
  let keys: KeyLayout;

  beforeAll(async () => {
    cluster = await startTestCluster({ masters: 3, replicas: 1 });
    keys = new KeyLayout(uniquePrefix('failovers'));
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

  it('a write that timed out (OUTCOME_UNKNOWN) while a failing-over master held it is not run later on the new master', async () => {
    const key = keys.product(products[0]).stock;
    const { slot, master, replica } = await failoverPair(cluster, key);
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
      await takeOver(cluster, replica, slot);
      await relearnedMap(own, replica.port);
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
    const { slot, master, replica } = await failoverPair(cluster, key);
    const own = await clusterClient(cluster);
    try {
      await own.set(key, '0');
      master.pause();
      // A buyer's write meets the stopped node: it times out (OUTCOME_UNKNOWN), as it did before.
      expect(await own.incr(key).then(String, (err: Error) => `error: ${err.message}`)).toBe(
        'error: Command timed out',
      );
      await takeOver(cluster, replica, slot);
      // Two refreshes of the app's own (every SLOTS_REFRESH_MS): the stopped node serves no
      // slot. Its timed-out INCR stays in its commandQueue until the node answers; settled,
      // it keeps the node in the pool no longer. Kept, quit() would wait on its QUIT and
      // reject "Command timed out".
      for (let i = 0; i < 2; i++) await new Promise((resolve) => own.once('refresh', resolve));
      const pooled = own.nodes('all').map((n) => n.options.port);
      const quit = await own.quit().then(String, (err: Error) => `error: ${err.message}`);
      expect({ pooled: pooled.includes(master.port), quit }).toEqual({ pooled: false, quit: 'OK' });
    } finally {
      master.resume();
      own.disconnect();
    }
  }, 60_000);
});
