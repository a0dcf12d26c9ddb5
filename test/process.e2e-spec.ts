import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { freePort } from '../scripts/redis-server';
import { KeyLayout } from '../src/redis/key-layout';
import { ADMIN_TOKEN, startSale, waitForHealth } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

const MAIN = join(__dirname, '..', 'dist', 'src', 'main.js');

/** The built app as a real process, as `npm start` runs it. */
describe('the built app (dist/src/main.js) as a process', () => {
  let redis: TestRedis;
  let client: Redis;
  const started: ChildProcess[] = [];

  beforeAll(async () => {
    if (!existsSync(MAIN))
      throw new Error('dist/src/main.js is missing: run `npm test` (it builds first) or `npm run build`');
    redis = await startTestRedis();
    client = new Redis(redis.url);
  });

  afterAll(async () => {
    for (const app of started) if (app.exitCode === null && app.signalCode === null) app.kill('SIGKILL');
    await closeClient(client);
    await redis?.stop();
  });

  it.each([
    [{ LOCK_TTL_MS: 'ten seconds' }, 'LOCK_TTL_MS must be an integer'],
    [{ LOCK_STRATEGY: 'none' }, 'LOCK_STRATEGY "none" can oversell'],
    [{ REDIS_URL: '' }, 'REDIS_URL is required'],
  ])('refuses to start with %j: exit 1 and one line naming the variable', (overrides, message) => {
    const env = { ...process.env, REDIS_URL: redis.url, ADMIN_TOKEN, PORT: '0', ...overrides };
    const run = spawnSync(process.execPath, [MAIN], { env, encoding: 'utf8', timeout: 15_000 });
    expect(run.status).toBe(1);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`seckill: invalid configuration: ${message}`);
  });

  /** Starts dist/src/main.js on a free port and waits until /health says 200. */
  async function startApp(prefix: string, env: Record<string, string> = {}) {
    const port = await freePort();
    let output = '';
    const app = spawn(process.execPath, [MAIN], {
      env: {
        ...process.env,
        REDIS_URL: redis.url,
        KEY_PREFIX: prefix,
        ADMIN_TOKEN,
        PORT: String(port),
        HOST: '127.0.0.1',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    started.push(app);
    app.stdout!.on('data', (d) => (output += d));
    app.stderr!.on('data', (d) => (output += d));
    const exited = new Promise<number | null>((resolve) => app.once('exit', (code) => resolve(code)));
    const url = `http://127.0.0.1:${port}`;
    await waitForHealth(url);
    return { app, port, url, exited, output: () => output };
  }

  /**
   * POST /api/orders on a connection of its own, sending the body once the app has read
   * the headers (`Expect: 100-continue`, which Node answers `100 Continue`): from then on
   * the request is certainly the app's, not bytes in a socket buffer that closing would reset.
   */
  function purchaseOnceRead(port: number, order: unknown) {
    const body = JSON.stringify(order);
    let read!: () => void;
    const headersRead = new Promise<void>((resolve) => (read = resolve));
    const answer = new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
      const req = httpRequest({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/api/orders',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          expect: '100-continue',
        },
      });
      req.on('continue', () => {
        read();
        req.end(body);
      });
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      });
      req.on('error', reject);
      req.flushHeaders();
    });
    return { headersRead, answer };
  }

  it('on SIGTERM lets in-flight purchases finish, releases their locks, closes Redis and exits 0', async () => {
    const prefix = uniquePrefix('shutdown');
    const { app, port, url, exited, output } = await startApp(prefix);
    await startSale(url, 'drain', 100);

    // Another process holds the lock until the app is closing, so our purchases are
    // certainly in flight (waiting for it) when SIGTERM arrives, and go on after it.
    const k = new KeyLayout(prefix).product('drain');
    await client.set(k.lock, 'another-holder', 'PX', 30_000);
    const purchases = Array.from({ length: 30 }, (_, i) =>
      purchaseOnceRead(port, { productId: 'drain', userId: `u${i}` }),
    );
    await Promise.all(purchases.map((p) => p.headersRead));
    app.kill('SIGTERM');
    while (!output().includes('SIGTERM: finishing in-flight requests')) await sleep(10);
    await client.del(k.lock);

    const answers = await Promise.all(purchases.map((p) => p.answer));
    expect(answers.map((a) => a.status)).toEqual(Array(30).fill(201));
    expect(await exited).toBe(0);
    expect(output()).toContain('SIGTERM: finishing in-flight requests');
    expect(await client.xlen(k.orders)).toBe(30);
    expect(await client.get(k.stock)).toBe('70');
    expect(await client.exists(k.lock)).toBe(0);
    // The app's own connection is gone: only ours is left.
    const names = (await client.client('LIST')) as string;
    expect(names).not.toContain('name=seckill');
  });
});
