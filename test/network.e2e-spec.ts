import { Redis } from 'ioredis';
import { connect } from 'node:net';
import { startTcpProxy, TcpProxy } from '../harness/tcp-proxy';
import { KeyLayout } from '../src/redis/key-layout';
import { request, startSale, startTestApp, TestApp } from './helpers/app';
import { WRITE_MARKER, portOf } from './helpers/network';
import { uniquePrefix, useTestRedis } from './helpers/redis';

/**
 * The network between the app and Redis misbehaving, through a TCP proxy the test
 * controls (harness/tcp-proxy.ts): each fault is armed on the request that carries
 * the write, so the test knows exactly which command it hit.
 */
describe('network faults between the app and Redis', () => {
  const redis = useTestRedis();
  let client: Redis;

  beforeAll(() => {
    client = redis.client();
  });

  describe.each(Object.entries(WRITE_MARKER))('%s: the reply to the write is lost', (strategy, marker) => {
    let proxy: TcpProxy;
    let app: TestApp;
    let keys: KeyLayout;

    beforeAll(async () => {
      proxy = await startTcpProxy({ port: portOf(redis.url()) });
      const prefix = uniquePrefix(`lost-${strategy}`);
      keys = new KeyLayout(prefix);
      app = await startTestApp({ REDIS_URL: proxy.url, KEY_PREFIX: prefix, LOCK_STRATEGY: strategy });
    });

    afterAll(async () => {
      await app?.close();
      await proxy?.close();
    });

    it('is OUTCOME_UNKNOWN, and the write is applied once: never resent by the client', async () => {
      const k = keys.product('p');
      await startSale(app.url, 'p', 5, 2);
      // A first purchase loads the scripts, so the armed request is the write itself.
      const first = await request(app.url, 'POST', '/api/orders', { json: { productId: 'p', userId: 'warm' } });
      expect(first.status).toBe(201);
      const cut = proxy.loseReplyTo(marker!);
      const answer = await request(app.url, 'POST', '/api/orders', { json: { productId: 'p', userId: 'buyer' } });
      await cut;
      expect(answer.body).toMatchObject({ statusCode: 503, code: 'OUTCOME_UNKNOWN' });
      expect(answer.headers.get('retry-after')).toBe('1');
      // It reached Redis once: one order for the buyer, one unit gone.
      const orders = await client.xrange(k.orders, '-', '+');
      const buyers = orders.map(([, fields]) => fields[fields.indexOf('userId') + 1]);
      expect(buyers).toEqual(['warm', 'buyer']);
      expect(await client.get(k.stock)).toBe('3');
      expect(await client.hget(k.buyers, 'buyer')).toBe('1');
    });
  });

  it("the proxy hangs up on a client that is not Redis's (another test's stray health poll on its port), and serves the rest", async () => {
    const proxy = await startTcpProxy({ port: portOf(redis.url()) });
    /** What the proxy answers `bytes` with, until it closes the connection or `until` is read. */
    const exchange = (bytes: string, until?: string) =>
      new Promise<{ answer: string; closed: boolean }>((resolve) => {
        const socket = connect(proxy.port, '127.0.0.1');
        let answer = '';
        socket.on('error', () => undefined);
        socket.on('data', (d: Buffer) => {
          answer += d.toString('latin1');
          if (until !== undefined && answer.includes(until)) {
            socket.destroy();
            resolve({ answer, closed: false });
          }
        });
        socket.on('close', () => resolve({ answer, closed: true }));
        socket.write(bytes);
      });
    try {
      expect(await exchange('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')).toEqual({ answer: '', closed: true });
      expect(await exchange('*1\r\n$4\r\nPING\r\n', '+PONG\r\n')).toEqual({ answer: '+PONG\r\n', closed: false });
      await proxy.idle();
    } finally {
      await proxy.close();
    }
  });
});
