import { setTimeout as sleep } from 'node:timers/promises';
import type { LockStrategyName } from '../src/config/app-config';
import { liveReplicasIn } from '../src/orders/replica-acks';
import { homeBucket, loggedMoves } from '../src/sale/buckets';
import { KeyLayout, ProductKeys } from '../src/redis/key-layout';
import { request, startSale, startTestApp, TestApp } from './helpers/app';
import { uniquePrefix, useReplicatedRedis } from './helpers/redis';

/**
 * REDIS_WAIT_REPLICAS against a real master and a real replica: a 201 only once the
 * replica has the order. A replica that stops answering (SIGSTOP) turns the next
 * order into 503 OUTCOME_UNKNOWN, with the order on the master, for every way a
 * purchase writes (the shared client, or optimistic's own WATCH connection, where
 * WAIT must follow the write to count it).
 */
describe('REDIS_WAIT_REPLICAS', () => {
  const pair = useReplicatedRedis();

  /** An app on the master that waits for `replicas` replica acks (300 ms) after each write, under a fresh key prefix. */
  async function waitingApp(name: string, replicas: number, env: Record<string, string> = {}) {
    const prefix = uniquePrefix(name);
    const app = await startTestApp({
      REDIS_URL: pair.master.url,
      KEY_PREFIX: prefix,
      REDIS_WAIT_REPLICAS: String(replicas),
      REDIS_WAIT_TIMEOUT_MS: '300',
      ...env,
    });
    return { app, prefix };
  }

  it.each<LockStrategyName>(['fenced', 'atomic', 'optimistic'])(
    '%s: 201 once the replica has the order; with the replica stopped, 503 OUTCOME_UNKNOWN and the order on the master',
    async (strategy) => {
      const { app, prefix } = await waitingApp(`wait-${strategy}`, 1, { LOCK_STRATEGY: strategy });
      try {
        await startSale(app.url, 'phone', 10);
        const k = new KeyLayout(prefix).product('phone');

        const first = await request(app.url, 'POST', '/api/orders', { json: { productId: 'phone', userId: 'u1' } });
        expect(first.status).toBe(201);

        // The replica has acknowledged everything written so far (WAIT asks it), so a
        // WAIT sent on a connection that did not carry the next order would return at once.
        await pair.client.set(`${prefix}synced`, '1');
        expect(await pair.client.wait(1, 5_000)).toBe(1);
        process.kill(pair.replica.pid, 'SIGSTOP');
        try {
          const second = await request(app.url, 'POST', '/api/orders', {
            json: { productId: 'phone', userId: 'u2' },
          });
          expect(second.status).toBe(503);
          expect(second.body.code).toBe('OUTCOME_UNKNOWN');
          expect(second.body.message).toContain('only 0 of the 1 replicas');
          expect(second.body.message).toContain('a retry without one may buy a second time');
        } finally {
          process.kill(pair.replica.pid, 'SIGCONT');
        }
        // Written to the master all the same: unconfirmed, not undone.
        expect(await pair.client.xlen(k.orders)).toBe(2);
        expect(await pair.client.hget(k.buyers, 'u2')).toBe('1');
      } finally {
        await app.close();
      }
    },
    30_000,
  );

  it('lands an escrow move only once the replica has its first step; until then the units stay in flight', async () => {
    const { app, prefix } = await waitingApp('wait-buckets', 1);
    try {
      const put = await request(app.url, 'PUT', '/api/products/pair', { json: { stock: 2, buckets: 2 }, admin: true });
      expect(put.status).toBe(200);
      const keys = new KeyLayout(prefix);
      const [home, other] = [keys.product('pair'), keys.product('pair~1')];
      const homed: string[] = [];
      for (let i = 0; homed.length < 3; i++) if (homeBucket(`w${i}`, 2) === 0) homed.push(`w${i}`);
      const buy = (userId: string) => request(app.url, 'POST', '/api/orders', { json: { productId: 'pair', userId } });
      expect((await buy(homed[0])).status).toBe(201);
      await pair.client.set(`${prefix}synced`, '1');
      expect(await pair.client.wait(1, 5_000)).toBe(1);
      process.kill(pair.replica.pid, 'SIGSTOP');
      try {
        const waiting = await buy(homed[1]);
        expect(waiting.status).toBe(503);
        expect(waiting.body.code).toBe('REDIS_UNAVAILABLE');
        expect(waiting.body.message).toContain("not on 1 replicas of pair~1's master yet; nothing was written");
      } finally {
        process.kill(pair.replica.pid, 'SIGCONT');
      }
      // Out of its source, logged there, landed nowhere: the next buyer lands it and buys.
      const inFlight = async () => loggedMoves(await pair.client.hgetall(other.moves)).length;
      expect([await pair.client.get(home.stock), await pair.client.get(other.stock), await inFlight()]).toEqual([
        '0',
        '0',
        1,
      ]);
      expect((await buy(homed[2])).status).toBe(201);
      expect([await inFlight(), await pair.client.xlen(home.orders)]).toEqual([0, 2]);
    } finally {
      await app.close();
    }
  }, 30_000);

  it('refuses a purchase before writing anything when the master has fewer live replicas than asked', async () => {
    const { app, prefix } = await waitingApp('wait-missing', 2);
    try {
      await startSale(app.url, 'phone', 10);
      const res = await request(app.url, 'POST', '/api/orders', { json: { productId: 'phone', userId: 'u1' } });
      expect(res.status).toBe(503);
      expect(res.body.code).toBe('REDIS_UNAVAILABLE');
      expect(res.body.message).toContain('has 1 live replica and REDIS_WAIT_REPLICAS asks for 2: nothing was written');
      const k = new KeyLayout(prefix).product('phone');
      expect(await pair.client.xlen(k.orders)).toBe(0);
      expect(await pair.client.get(k.stock)).toBe('10');
    } finally {
      await app.close();
    }
  });

  /** Resolves once the master counts `count` live replicas (replica-acks.ts liveReplicasIn), and the app's count of them is stale. */
  async function liveReplicas(count: number): Promise<void> {
    while (liveReplicasIn(await pair.client.info('replication')) !== count) await sleep(50);
    await sleep(1_100); // past the app's REPLICAS_FRESH_MS
  }

  describe('with an Idempotency-Key, while the master lacks the replicas', () => {
    let app: TestApp;
    let k: ProductKeys;
    const buy = (userId: string, key: string) =>
      request(app.url, 'POST', '/api/orders', {
        json: { productId: 'phone', userId },
        headers: { 'idempotency-key': key },
      });

    const answered = (res: { status: number; headers: Headers }) => ({
      status: res.status,
      replayed: res.headers.get('idempotent-replayed'),
    });

    beforeEach(async () => {
      const started = await waitingApp('wait-keyed', 1);
      app = started.app;
      await startSale(app.url, 'phone', 10);
      k = new KeyLayout(started.prefix).product('phone');
    });

    afterEach(async () => {
      process.kill(pair.replica.pid, 'SIGCONT');
      await app.close();
      await liveReplicas(1);
    });

    it('a retry of an order the replica has is answered it again (201 replayed); a new key is refused, nothing written', async () => {
      const first = await buy('u1', 'k1');
      expect(first.status).toBe(201);
      process.kill(pair.replica.pid, 'SIGSTOP');
      await liveReplicas(0);

      const retry = await buy('u1', 'k1');
      expect(answered(retry)).toEqual({ status: 201, replayed: 'true' });
      expect(retry.body).toEqual(first.body);

      const fresh = await buy('u2', 'k2');
      expect(fresh.status).toBe(503);
      expect(fresh.body.code).toBe('REDIS_UNAVAILABLE');
      expect(fresh.body.message).toContain(
        'has 0 live replicas and REDIS_WAIT_REPLICAS asks for 1: nothing was written',
      );
      expect(await pair.client.hget(k.idem, 'k2')).toBeNull();
      expect(await pair.client.xlen(k.orders)).toBe(1);
      expect(await pair.client.get(k.stock)).toBe('9');
    }, 30_000);

    it('a retry of an order no replica acknowledged is 503 OUTCOME_UNKNOWN until one has it, then 201 replayed', async () => {
      // Acknowledged up to here, so the WAIT behind the next order waits for it alone.
      await pair.client.set(`${k.stock}:synced`, '1');
      expect(await pair.client.wait(1, 5_000)).toBe(1);
      process.kill(pair.replica.pid, 'SIGSTOP');
      const first = await buy('u1', 'k1');
      expect(first.body.code).toBe('OUTCOME_UNKNOWN');
      await liveReplicas(0);

      // Written, not confirmed: no 201 for it while no replica can have it.
      const early = await buy('u1', 'k1');
      expect(early.status).toBe(503);
      expect(early.body.code).toBe('OUTCOME_UNKNOWN');
      expect(early.body.message).toContain('retry with the same Idempotency-Key');

      process.kill(pair.replica.pid, 'SIGCONT');
      await liveReplicas(1);
      const confirmed = await buy('u1', 'k1');
      expect(answered(confirmed)).toEqual({ status: 201, replayed: 'true' });
      expect(confirmed.body).toMatchObject({ productId: 'phone', userId: 'u1', remaining: 9 });
      expect(await pair.client.xlen(k.orders)).toBe(1);
    }, 30_000);
  });

  it('counts the replicas INFO lists as online and acknowledging within two seconds', () => {
    const info = [
      '# Replication',
      'role:master',
      'connected_slaves:3',
      'slave0:ip=127.0.0.1,port=1,state=online,offset=10,lag=0',
      'slave1:ip=127.0.0.1,port=2,state=wait_bgsave,offset=0,lag=0',
      'slave2:ip=127.0.0.1,port=3,state=online,offset=9,lag=7',
      'master_repl_offset:10',
    ].join('\r\n');
    expect(liveReplicasIn(info)).toBe(1);
  });
});
