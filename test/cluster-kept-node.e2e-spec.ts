import { Redis } from 'ioredis';
import { KeyLayout } from '../src/redis/key-layout';
import {
  clusterClient,
  failoverPair,
  readSlotMap,
  startTestCluster,
  takeOver,
  TestCluster,
  uniquePrefix,
} from './helpers/redis';

/**
 * keepNodesAnswering (src/redis/node-pool.ts) keeps a node that serves no slot any more
 * while one of its commands waits for an answer, moved to the replicas by hand: put back
 * as one ({readOnly: true}), ioredis' pool would take it for a role change and send
 * READONLY behind the held commands, a command of its own that would keep the node (a
 * node paused, cut off or stopped) up to COMMAND_TIMEOUT_MS longer.
 */
describe('the cluster client: an old master kept for a held write', () => {
  let cluster: TestCluster;
  afterAll(async () => {
    await cluster?.stop();
  });

  it("is kept for the buyers' commands it holds alone: the pool sends it nothing (no READONLY)", async () => {
    cluster = await startTestCluster({ masters: 3, replicas: 1 });
    const keys = new KeyLayout(uniquePrefix('kept'));
    const admin = new Redis(cluster.nodes[0].url);
    const map = await readSlotMap(admin).finally(() => admin.quit());
    const key = keys.product(map.productsOnEveryShard(keys)[0]).stock;
    const { slot, master, replica } = await failoverPair(cluster, key);
    const own = await clusterClient(cluster);
    try {
      await own.set(key, '0');
      // Stopped, the old master never learns of the takeover: no slot map lists it again.
      master.pause();
      const write = own.incr(key).then(String, (err: Error) => `error: ${err.message}`);
      await takeOver(cluster, replica, slot);
      // The old master serves no slot: kept for the held INCR.
      await new Promise<void>((resolve) => {
        own.once('refresh', () => resolve());
        own.refreshSlotsCache();
      });
      const node = own.nodes('all').find((n) => n.options.port === master.port);
      const held = (
        node as unknown as { commandQueue: { toArray(): { command: { name: string } }[] } } | undefined
      )?.commandQueue
        .toArray()
        .map(({ command }) => command.name);
      expect(await write).toBe('error: Command timed out');
      expect(held).toEqual(['incr']);
    } finally {
      master.resume();
      own.disconnect();
    }
  }, 60_000);
});
