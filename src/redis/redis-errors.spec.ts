import calculateSlot from 'cluster-key-slot';
import { Redis, ReplyError } from 'ioredis';
import { startTestCluster, TestCluster } from '../../test/helpers/redis';
import { isOutcomeUnknown, isRedisUnavailable } from './redis-errors';

describe('redis-errors against a real Redis Cluster', () => {
  let cluster: TestCluster;

  beforeAll(async () => {
    cluster = await startTestCluster({ masters: 3 });
  }, 60_000);

  afterAll(() => cluster?.stop());

  /**
   * ioredis follows a redirection for a command sent alone, but an auto-pipelined batch
   * that came back with mixed replies (during a slot migration) hands each caller its
   * own reply, MOVED and ASK included. The node ran nothing: 503, not a 500, and not
   * an unknown outcome.
   */
  it.each(['MOVED', 'ASK'])('%s means "not here, nothing ran": unavailable, outcome known', async (kind) => {
    const key = 'errors:{p:phone}:stock';
    const slot = calculateSlot(key);
    const owner = await cluster.masterOfSlot(slot);
    const other = (await cluster.masters()).find((m) => m !== owner)!;
    const admin = new Redis(owner.url);
    const elsewhere = new Redis(other.url);
    try {
      if (kind === 'ASK') {
        // The slot is migrating to `other` and the key is not on its owner: the owner says ASK.
        await admin.cluster('SETSLOT', slot, 'MIGRATING', String(await elsewhere.cluster('MYID')));
      }
      const err = await (kind === 'MOVED' ? elsewhere : admin).decrby(key, 1).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ReplyError);
      expect((err as Error).message).toMatch(new RegExp(`^${kind} ${slot} `));
      expect(isRedisUnavailable(err)).toBe(true);
      expect(isOutcomeUnknown(err)).toBe(false);
      expect(await admin.cluster('COUNTKEYSINSLOT', slot)).toBe(0);
    } finally {
      if (kind === 'ASK') await admin.cluster('SETSLOT', slot, 'STABLE');
      admin.disconnect();
      elsewhere.disconnect();
    }
  });
});
