import { KeyLayout } from '../src/redis/key-layout';
import { moveOut, moveOutKeys } from '../src/redis/lua-scripts';
import { request, startTestApp } from './helpers/app';
import { uniquePrefix, useReplicatedRedis } from './helpers/redis';

/**
 * A second outside review of the waiting room over escrow buckets (f21ea17), on a
 * standalone Redis (every bucket on one server) with a replica: REDIS_WAIT_REPLICAS.
 */
describe('the waiting room over escrow buckets with REDIS_WAIT_REPLICAS (standalone master and replica)', () => {
  const pair = useReplicatedRedis();

  it('a join is answered its ticket while the replica is away, though a move is still in flight (a join places no order)', async () => {
    const prefix = uniquePrefix('r44b-wait');
    const keys = new KeyLayout(prefix);
    const app = await startTestApp({
      REDIS_URL: pair.master.url,
      KEY_PREFIX: prefix,
      REDIS_WAIT_REPLICAS: '1',
      REDIS_WAIT_TIMEOUT_MS: '300',
      LOCK_STRATEGY: 'fenced',
    });
    try {
      const put = await request(app.url, 'PUT', '/api/products/rep', {
        json: { stock: 3, buckets: 3, queue: { admitPerSecond: 100 } },
        admin: true,
      });
      expect(put.status).toBe(200);
      const ids = (await request(app.url, 'GET', '/api/products/rep/buckets', { admin: true })).body.map(
        (x: { id: string }) => x.id,
      );
      expect(ids).toHaveLength(3);
      // What an app stopped after a move's first step leaves: bucket 2's unit out, logged, landed nowhere.
      const out = await moveOut.run(pair.client, moveOutKeys(keys.product(ids[2])), 'stuck', ids[0], 1, '');
      expect(out[0]).toBe('OUT');
      expect(await pair.client.wait(1, 5_000)).toBe(1);
      process.kill(pair.replica.pid, 'SIGSTOP');
      let joined;
      try {
        joined = await request(app.url, 'POST', '/api/products/rep/queue', { json: { userId: 'w1' } });
      } finally {
        process.kill(pair.replica.pid, 'SIGCONT');
      }
      // Without buckets (or without a move in flight) a join needs no replica: it writes no order.
      expect(joined.body.message ?? '').not.toContain('purchase');
      expect(joined.status).toBe(202);
      expect(joined.body.state).toBe('admitted');
    } finally {
      await app.close();
    }
  });
});
