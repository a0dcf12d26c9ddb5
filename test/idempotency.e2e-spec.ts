import { Redis } from 'ioredis';
import { startTcpProxy, TcpProxy } from '../harness/tcp-proxy';
import { Idempotency } from '../src/orders/idempotency';
import { KeyLayout, ProductKeys } from '../src/redis/key-layout';
import { request, startSale, startTestApp, TestApp } from './helpers/app';
import { KEYED_WRITE_MARKER, portOf } from './helpers/network';
import { startTestRedis, TestRedis, uniquePrefix, useTestRedis } from './helpers/redis';

/**
 * How long a claim stays in flight here. The service's is LOCK_WAIT_MS + 7 s (each step
 * of a purchase bounded by the 2 s command timeout, plus slack), which the held write's
 * test below would wait out for each strategy. The retry that must hear 409 is sent the
 * moment the write is held, so 3 s keeps it inside the window with seconds to spare, and
 * Redis's clock still decides the lapse: the claim carries its deadline.
 */
const CLAIM_MS = 3_000;

/**
 * POST /api/orders with an Idempotency-Key, on real apps and a real Redis, with the
 * network between them misbehaving through TCP proxies the test controls.
 */
describe('Idempotency-Key', () => {
  const redis = useTestRedis();
  let client: Redis;

  beforeAll(() => {
    client = redis.client();
  });

  // Every safe strategy: each one's write re-checks the key's claim.
  describe.each(
    (['fenced', 'atomic', 'optimistic', 'lock', 'reentrant', 'redlock'] as const).map((s) => [
      s,
      KEYED_WRITE_MARKER[s]!,
    ]),
  )('%s', (strategy, marker) => {
    /** Two apps on one Redis, each behind its own proxy, under one key prefix. */
    let proxies: TcpProxy[];
    let apps: TestApp[];
    let k: ProductKeys;
    let product: string;
    let n = 0;

    /** Redlock's own lock nodes, reached directly (only the sale's Redis is behind the proxies). */
    let lockNodes: TestRedis[] = [];

    beforeAll(async () => {
      const prefix = uniquePrefix(`idem-${strategy}`);
      if (strategy === 'redlock') lockNodes = await Promise.all([1, 2, 3].map(() => startTestRedis()));
      const redlock: Record<string, string> =
        strategy === 'redlock' ? { REDLOCK_URLS: lockNodes.map((n) => n.url).join(',') } : {};
      proxies = await Promise.all([0, 1].map(() => startTcpProxy({ port: portOf(redis.url()) })));
      apps = await Promise.all(
        proxies.map((p) =>
          // A short wait for the lock: a purchase stays well inside the claim's window. A
          // short TTL: the lock a held write's purchase took lapses before its claim does
          // (its release and renewals wait in the proxy behind the write).
          startTestApp({
            REDIS_URL: p.url,
            KEY_PREFIX: prefix,
            LOCK_STRATEGY: strategy,
            LOCK_WAIT_MS: '1000',
            LOCK_TTL_MS: '2000',
            ...redlock,
          }),
        ),
      );
      for (const a of apps) Object.assign(a.app.get(Idempotency), { claimTtlMs: CLAIM_MS });
      keysOf = new KeyLayout(prefix);
    });
    let keysOf: KeyLayout;

    afterAll(async () => {
      await Promise.all((apps ?? []).map((a) => a.close()));
      await Promise.all((proxies ?? []).map((p) => p.close()));
      await Promise.all(lockNodes.map((n) => n.stop()));
    });

    beforeEach(async () => {
      product = `p${++n}`;
      k = keysOf.product(product);
      await startSale(apps[0].url, product, 5, 2);
      // Loads the scripts on the connection, so an armed fault hits the write itself.
      await buy(0, 'warm-up');
    });

    const buy = (app: number, userId: string, key?: string, quantity = 1) =>
      request(apps[app].url, 'POST', '/api/orders', {
        json: { productId: product, userId, quantity },
        headers: key ? { 'idempotency-key': key } : {},
      });

    /** The buyer's orders in the stream, by orderId. */
    async function ordersOf(userId: string): Promise<string[]> {
      const entries = await client.xrange(k.orders, '-', '+');
      return entries
        .map(([, f]) => ({ userId: f[f.indexOf('userId') + 1], orderId: f[f.indexOf('orderId') + 1] }))
        .filter((o) => o.userId === userId)
        .map((o) => o.orderId);
    }

    it('a retry with the same key and body answers the same order and writes nothing', async () => {
      const first = await buy(0, 'ann', 'key-ann');
      const again = await buy(1, 'ann', 'key-ann');
      expect(first.status).toBe(201);
      expect(again.status).toBe(201);
      expect(again.body).toEqual(first.body);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      expect(await ordersOf('ann')).toEqual([first.body.orderId]);
      expect(await client.get(k.stock)).toBe('3');
    });

    it('the same key with another body is 422 IDEMPOTENCY_KEY_MISMATCH and changes nothing', async () => {
      expect((await buy(0, 'bob', 'key-bob')).status).toBe(201);
      const other = await buy(0, 'bob', 'key-bob', 2);
      expect(other.status).toBe(422);
      expect(other.body).toMatchObject({ statusCode: 422, code: 'IDEMPOTENCY_KEY_MISMATCH' });
      expect(await ordersOf('bob')).toHaveLength(1);
      expect(await client.get(k.stock)).toBe('3');
    });

    it('a malformed key is 400 VALIDATION_FAILED naming the header, and changes nothing', async () => {
      const bad = await buy(0, 'cid', 'has space');
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ code: 'VALIDATION_FAILED', errors: [{ field: 'Idempotency-Key' }] });
      expect(await ordersOf('cid')).toEqual([]);
      // The draft's sf-string form is the same key as the bare one.
      const quoted = await buy(0, 'cid', '"k-cid"');
      const bare = await buy(0, 'cid', 'k-cid');
      expect(bare.body.orderId).toBe(quoted.body.orderId);
    });

    it('after a lost answer (OUTCOME_UNKNOWN), a retry with the key finds the order that was written', async () => {
      const cut = proxies[0].loseReplyTo(marker!);
      const lost = await buy(0, 'dan', 'key-dan');
      await cut;
      expect(lost.body).toMatchObject({ statusCode: 503, code: 'OUTCOME_UNKNOWN' });
      const retry = await buy(1, 'dan', 'key-dan');
      expect(retry.status).toBe(201);
      expect(await ordersOf('dan')).toEqual([retry.body.orderId]);
      expect(await client.get(k.stock)).toBe('3');
    });

    /** Redis's clock, in ms. */
    async function redisNow(): Promise<number> {
      const [seconds, micros] = await client.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    }

    /**
     * Until the key's claim is no longer in flight: given up (a give-up that reached
     * Redis), decided, or past the deadline it carries (Redis's clock decides it).
     */
    async function claimLapsed(key: string): Promise<void> {
      for (;;) {
        const held = await client.hget(k.idem, key);
        const until = held?.startsWith('P|') ? Number(held.split('|')[2]) : 0;
        const now = await redisNow();
        if (now >= until) return;
        await new Promise((resolve) => setTimeout(resolve, until - now + 5));
      }
    }

    it('a write held in the network past its claim: the retry takes the key over and buys once; the late write writes nothing', async () => {
      const held = proxies[0].holdRequest(marker!);
      const lost = buy(0, 'eve', 'key-eve');
      await held;
      // App 0 still decides the key: a retry is told so, and buys nothing.
      const during = await buy(1, 'eve', 'key-eve');
      expect(during.body).toMatchObject({ statusCode: 409, code: 'IDEMPOTENCY_KEY_IN_USE' });
      // The claim carries the short window set above (not the service's 8 s here).
      const claim = (await client.hget(k.idem, 'key-eve'))!.split('|');
      expect(claim[0]).toBe('P');
      expect(Number(claim[2]) - (await redisNow())).toBeLessThanOrEqual(CLAIM_MS);
      // The stalled request is answered while its write is still held in the network
      // (each command queued behind the write times out in turn, 2 s apiece): an outcome
      // it cannot know, never a hang. Awaited here, before the network heals, so nothing
      // races: the answer cannot depend on the release.
      expect((await lost).body).toMatchObject({ code: 'OUTCOME_UNKNOWN' });
      // Its claim lapses, and the lock it took with it: a retry then takes the key over and buys.
      await claimLapsed('key-eve');
      const retry = await buy(1, 'eve', 'key-eve');
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBeNull();
      // The held write, delivered now, finds its claim taken over and writes nothing:
      // one order for the key, not two (every strategy's write checks the claim).
      proxies[0].release();
      await proxies[0].idle();
      expect(await ordersOf('eve')).toEqual([retry.body.orderId]);
      expect(await client.get(k.stock)).toBe('3');
      const again = await buy(0, 'eve', 'key-eve');
      expect(again.status).toBe(201);
      expect(again.body.orderId).toBe(retry.body.orderId);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
    });
  });
});
