import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { freePort } from '../scripts/redis-server';
import { KeyLayout } from '../src/redis/key-layout';
import { ADMIN_TOKEN, request, startSale, waitForHealth } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

const MAIN = join(__dirname, '..', 'dist', 'src', 'main.js');

/** The built app as a real process, as `npm start` runs it. */
describe('the built app (dist/src/main.js) as a process', () => {
  let redis: TestRedis;
  let client: Redis;
  let app: ChildProcess | undefined;

  beforeAll(async () => {
    if (!existsSync(MAIN))
      throw new Error('dist/src/main.js is missing: run `npm test` (it builds first) or `npm run build`');
    redis = await startTestRedis();
    client = new Redis(redis.url);
  });

  afterAll(async () => {
    if (app?.exitCode === null) app.kill('SIGKILL');
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

  it('on SIGTERM lets in-flight purchases finish, releases their locks, closes Redis and exits 0', async () => {
    const prefix = uniquePrefix('shutdown');
    const port = await freePort();
    let output = '';
    app = spawn(process.execPath, [MAIN], {
      env: {
        ...process.env,
        REDIS_URL: redis.url,
        KEY_PREFIX: prefix,
        ADMIN_TOKEN,
        PORT: String(port),
        HOST: '127.0.0.1',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    app.stdout!.on('data', (d) => (output += d));
    app.stderr!.on('data', (d) => (output += d));
    const exited = new Promise<number | null>((resolve) => app!.once('exit', (code) => resolve(code)));
    const url = `http://127.0.0.1:${port}`;
    await waitForHealth(url);
    await startSale(url, 'drain', 100);

    // Another process holds the lock for a moment, so our purchases are certainly
    // in flight (waiting for it) when SIGTERM arrives.
    const k = new KeyLayout(prefix).product('drain');
    await client.set(k.lock, 'another-holder', 'PX', 1_000);
    const purchases = Array.from({ length: 30 }, (_, i) =>
      request(url, 'POST', '/api/orders', { json: { productId: 'drain', userId: `u${i}` } }),
    );
    await sleep(300);
    app.kill('SIGTERM');

    const answers = await Promise.all(purchases);
    expect(answers.map((a) => a.status)).toEqual(Array(30).fill(201));
    expect(await exited).toBe(0);
    expect(output).toContain('SIGTERM: finishing in-flight requests');
    expect(await client.xlen(k.orders)).toBe(30);
    expect(await client.get(k.stock)).toBe('70');
    expect(await client.exists(k.lock)).toBe(0);
    // The app's own connection is gone: only ours is left.
    const names = (await client.client('LIST')) as string;
    expect(names).not.toContain('name=seckill');
  });
});
