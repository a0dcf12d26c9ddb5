import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { checkHistory, historyLine } from '../bench/history/check';
import { historyNow, linkClocks, readClock } from '../bench/history/clock';
import type { RequestRecord } from '../bench/history/history';
import { logComplete, readWholeLog } from '../bench/history/read-log';
import { waitUntil } from '../bench/faults/kit';
import { processState, RunningApp, startApp, stopAll } from '../harness/processes';
import { KeyLayout } from '../src/redis/key-layout';
import { orderOutcome, orderOutcomeKeys } from '../src/redis/lua-scripts';
import { ADMIN_TOKEN, request } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

/**
 * A unit returned (a cancel, an expiry: they take no lock) between a batch's read and
 * its write, in the batched purchase path of `lock`, `fenced` and `redlock`: the buyer
 * the batch's read crowded out is not told SOLD_OUT while that unit sits in stock (the
 * history checker's false refusal); it is served by the next hold and buys it.
 *
 * Made to happen on every run: the app (a real process) is stopped while three buyers'
 * requests reach its socket, so on resuming it takes the first alone and the other two
 * in one batch (read: 1 unit for 2 buyers); it stops itself at that batch's write
 * (FAULT_STOP_AT, its third), the test cancels the first order of the sale, and the
 * app resumes: its write leaves the returned unit in stock.
 */
describe('a unit returned while a batch is decided (batched path)', () => {
  let redis: TestRedis;
  const lockNodes: TestRedis[] = [];
  let client: Redis;

  beforeAll(async () => {
    redis = await startTestRedis();
    lockNodes.push(...(await Promise.all([0, 1, 2].map(() => startTestRedis()))));
    client = new Redis(redis.url);
  });

  afterAll(async () => {
    await stopAll();
    await closeClient(client);
    await Promise.all([redis, ...lockNodes].map((r) => r?.stop()));
  });

  it.each(['lock', 'fenced', 'redlock'])(
    '%s: the crowded-out buyer buys the returned unit, and the history holds',
    async (strategy) => {
      const prefix = uniquePrefix(`returns-${strategy}`);
      const app = await startApp({
        env: {
          REDIS_URL: redis.url,
          KEY_PREFIX: prefix,
          LOCK_STRATEGY: strategy,
          ADMIN_TOKEN,
          LOG_LEVEL: 'error',
          LOCK_WAIT_MS: '20000',
          FAULT_STOP_AT: 'before-write:3',
          ALLOW_UNSAFE: '1',
          ...(strategy === 'redlock' && { REDLOCK_URLS: lockNodes.map((n) => n.url).join(',') }),
        },
      });
      const k = new KeyLayout(prefix).product('r');
      const start = await readClock(client);
      const put = await request(app.url, 'PUT', '/api/products/r', {
        json: { stock: 3, paymentTimeoutMs: 600_000 },
        admin: true,
      });
      expect(put.status).toBe(200);
      const requests: RequestRecord[] = [];
      const first = await buy(app, 'u0', requests);
      expect(first.status).toBe(201);

      process.kill(app.pid, 'SIGSTOP');
      await waitUntil('the app to stop', async () => processState(app.pid) === 'T');
      // Each request is in the app's socket before it runs again.
      const sent = await Promise.all(['b1', 'b2', 'b3'].map((u) => send(app, u, requests)));
      process.kill(app.pid, 'SIGCONT');
      await waitUntil("the app to stop at its batch's write", async () => processState(app.pid) === 'T');
      // Between the batch's read and its write, the first order comes back to stock.
      const cancelled = await orderOutcome.run(
        client,
        orderOutcomeKeys(k),
        String(first.body.orderId),
        'cancel',
        '',
        k.marksGuess,
      );
      expect(cancelled[0]).toBe('C');
      process.kill(app.pid, 'SIGCONT');
      const answers = await Promise.all(sent.map((s) => s.answer));

      // One batch served two buyers: the one the read crowded out was really there.
      const metrics = await fetch(`${app.url}/metrics`).then((r) => r.text());
      const batches = Number(/^seckill_batch_size_count (\d+)/m.exec(metrics)![1]);
      const single = Number(/^seckill_batch_size_bucket\{le="1"\} (\d+)/m.exec(metrics)![1]);
      expect(batches - single).toBeGreaterThan(0);

      expect(answers.map((a) => a.status).sort()).toEqual([201, 201, 201]);
      expect(await client.get(k.stock)).toBe('0');
      const log = await readWholeLog(client, k.orders);
      const report = checkHistory({
        productId: 'r',
        stock: 3,
        perUserLimit: 1,
        log,
        logComplete: await logComplete(client, k.orders),
        requests,
        clock: linkClocks(start, await readClock(client)),
      });
      expect({ line: historyLine(report), findings: report.findings }).toEqual({
        line: expect.stringMatching(/^history holds: peak 3 of 3 /),
        findings: [],
      });
      await app.stop();
    },
    60_000,
  );
});

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/** One purchase through the app, as a record of the history. */
async function buy(app: RunningApp, userId: string, requests: RequestRecord[]): Promise<Answer> {
  return (await send(app, userId, requests)).answer;
}

/**
 * A purchase written to its own connection: resolves once the request is in the
 * kernel's hands (so it reaches a stopped app's socket), with its answer to come.
 */
function send(app: RunningApp, userId: string, requests: RequestRecord[]): Promise<{ answer: Promise<Answer> }> {
  const body = JSON.stringify({ productId: 'r', userId });
  const { port } = new URL(app.url);
  const record = { userId, quantity: 1, sentAt: historyNow(), answeredAt: null, status: null, code: null } as {
    -readonly [K in keyof RequestRecord]: RequestRecord[K];
  };
  requests.push(record);
  return new Promise((written, failed) => {
    const socket = connect(Number(port), '127.0.0.1');
    let raw = '';
    const answer = new Promise<Answer>((resolve, reject) => {
      socket.on('data', (chunk) => (raw += chunk.toString()));
      socket.on('end', () => {
        const status = Number(raw.split(' ')[1]);
        const parsed = JSON.parse(raw.slice(raw.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;
        Object.assign(record, {
          answeredAt: historyNow(),
          status,
          code: status === 201 ? 'CREATED' : String(parsed.code),
          ...(status === 201 && { orderId: String(parsed.orderId) }),
        });
        resolve({ status, body: parsed });
      });
      socket.on('error', reject);
    });
    socket.on('error', failed);
    socket.on('connect', () => {
      record.sentAt = historyNow();
      socket.write(
        `POST /api/orders HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        () => written({ answer }),
      );
    });
  });
}
