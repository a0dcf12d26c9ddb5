import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { APP_CWD } from '../harness/paths';
import { freePort } from '../scripts/redis-server';
import { KeyLayout } from '../src/redis/key-layout';
import { ADMIN_TOKEN, request, startSale, waitForHealth } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

const MAIN = join(__dirname, '..', 'dist', 'src', 'main.js');

/** How much longer than SHUTDOWN_TIMEOUT_MS a busy machine may take to exit. */
const EXIT_SLACK_MS = 5_000;

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
    const run = spawnSync(process.execPath, [MAIN], { cwd: APP_CWD, env, encoding: 'utf8', timeout: 15_000 });
    expect(run.status).toBe(1);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`seckill: invalid configuration: ${message}`);
  });

  it('names every invalid variable at once, HOST included, one line each, and no stack trace', () => {
    const env = {
      ...process.env,
      REDIS_URL: redis.url,
      ADMIN_TOKEN,
      PORT: 'eighty',
      LOCK_TTL_MS: 'ten seconds',
      HOST: 'not-a-host.invalid',
    };
    const run = spawnSync(process.execPath, [MAIN], { cwd: APP_CWD, env, encoding: 'utf8', timeout: 15_000 });
    expect(run.status).toBe(1);
    expect(run.stderr.trim().split('\n')).toEqual([
      'seckill: invalid configuration: PORT must be an integer from 0 to 65535, got "eighty"',
      'seckill: invalid configuration: LOCK_TTL_MS must be an integer from 100 to 3600000, got "ten seconds"',
      'seckill: invalid configuration: HOST must be an address or host name to listen on, got "not-a-host.invalid" (a name that does not resolve)',
    ]);
    expect(run.stdout).toBe('');
  });

  it('reads .env in its working directory, as `npm start` does, a variable set in the environment winning', () => {
    const dir = mkdtempSync(join(tmpdir(), 'seckill-env-'));
    try {
      writeFileSync(
        join(dir, '.env'),
        [`REDIS_URL=${redis.url}`, 'LOCK_TTL_MS="ten seconds"', 'LOCK_WAIT_MS=soon', '# a comment', ''].join('\n'),
      );
      const env: NodeJS.ProcessEnv = { ...process.env, ADMIN_TOKEN, PORT: '0', LOCK_TTL_MS: '2000' };
      delete env.REDIS_URL;
      delete env.LOCK_WAIT_MS;
      const run = spawnSync(process.execPath, [MAIN], { cwd: dir, env, encoding: 'utf8', timeout: 15_000 });
      expect(run.status).toBe(1);
      // REDIS_URL came from the file (not "is required"); LOCK_TTL_MS from the environment.
      expect(run.stderr.trim().split('\n')).toEqual([
        'seckill: invalid configuration: LOCK_WAIT_MS must be an integer from 0 to 600000, got "soon"',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  /** Starts dist/src/main.js on a free port and waits until /health says 200. */
  async function startApp(prefix: string, env: Record<string, string> = {}) {
    const port = await freePort();
    let output = '';
    const app = spawn(process.execPath, [MAIN], {
      cwd: APP_CWD,
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
    const answer = new Promise<{ status: number; connection: string | undefined; body: Record<string, unknown> }>(
      (resolve, reject) => {
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
            // As a browser or a pooled client asks: the answer decides whether it is kept.
            connection: 'keep-alive',
          },
        });
        req.on('continue', () => {
          read();
          req.end(body);
        });
        req.on('response', (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (d: string) => (text += d));
          res.on('end', () =>
            resolve({ status: res.statusCode!, connection: res.headers.connection, body: JSON.parse(text) }),
          );
        });
        req.on('error', reject);
        req.flushHeaders();
      },
    );
    return { headersRead, answer };
  }

  /** The exit code, or 'still running' if the process outlives `withinMs`. */
  function exitWithin(exited: Promise<number | null>, withinMs: number): Promise<number | null | 'still running'> {
    return Promise.race([exited, sleep(withinMs, 'still running' as const, { ref: false })]);
  }

  it.each([
    [
      '0.0.0.0',
      (port: number) =>
        `0.0.0.0:${port} (every IPv4 address of this machine; from this machine: http://127.0.0.1:${port})`,
    ],
    ['127.0.0.1', (port: number) => `http://127.0.0.1:${port}`],
  ])('says the address it listens on, HOST=%s, and a URL that reaches it', async (host, said) => {
    const { app, port, exited, output } = await startApp(uniquePrefix('listen'), { HOST: host });
    app.kill('SIGTERM');
    expect(await exited).toBe(0);
    const lines = output()
      .split('\n')
      .filter((line) => line.includes('"context":"Main"'))
      .map((line) => JSON.parse(line).msg as string);
    expect(lines).toContain(`seckill listening on ${said(port)}`);
  });

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
    // Answered while the shutdown waited for them: each closes its connection, so no
    // client reuses one that the server's close would end under its next request.
    expect(answers.map((a) => a.connection)).toEqual(Array(30).fill('close'));
    expect(await exited).toBe(0);
    expect(output()).toContain('SIGTERM: finishing in-flight requests');
    expect(await client.xlen(k.orders)).toBe(30);
    expect(await client.get(k.stock)).toBe('70');
    expect(await client.exists(k.lock)).toBe(0);
    // The app's own connection is gone: only ours is left.
    const names = (await client.client('LIST')) as string;
    expect(names).not.toContain('name=seckill');
  });

  it('on SIGTERM answers a client that sent half its body 408 REQUEST_TIMEOUT at SHUTDOWN_TIMEOUT_MS and exits 0', async () => {
    const { app, port, exited, output } = await startApp(uniquePrefix('slow-client'), { SHUTDOWN_TIMEOUT_MS: '1000' });

    const socket = connect(port, '127.0.0.1');
    socket.setEncoding('utf8');
    let received = '';
    socket.on('data', (d: string) => (received += d));
    socket.on('error', () => {}); // a reset is judged below, by what arrived
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    // `Expect: 100-continue` makes the app say when it has read the headers and is
    // waiting for the body (Node answers `100 Continue`): the request is certainly
    // under way, not merely in a socket buffer, when SIGTERM arrives.
    socket.write(
      'POST /api/orders HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        'Content-Length: 100\r\nExpect: 100-continue\r\n\r\n',
    );
    await new Promise<void>((resolve) => {
      const check = () => received.includes('100 Continue') && (socket.off('data', check), resolve());
      socket.on('data', check);
    });
    socket.write('{"productId":"slow","userId":"u1"'.padEnd(50, ' ')); // 50 of the 100 bytes

    const sent = Date.now();
    app.kill('SIGTERM');
    expect(await exitWithin(exited, 1_000 + EXIT_SLACK_MS)).toBe(0);
    expect(Date.now() - sent).toBeGreaterThanOrEqual(1_000);
    await closed;
    const answer = received.slice(received.indexOf('\r\n\r\n') + 4); // after the 100 Continue
    expect(answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({
      statusCode: 408,
      code: 'REQUEST_TIMEOUT',
    });
    expect(output()).toMatch(/shutdown deadline \(1000 ms\) passed: answered 1 unfinished request 408/);
  });

  it('at SHUTDOWN_TIMEOUT_MS answers a purchase still in progress 503 OUTCOME_UNKNOWN, logs it and exits 1', async () => {
    const prefix = uniquePrefix('cut');
    const { app, url, exited, output } = await startApp(prefix, {
      SHUTDOWN_TIMEOUT_MS: '1000',
      LOCK_WAIT_MS: '60000',
    });
    await startSale(url, 'held', 10);
    // Another process holds the lock far past the deadline: the purchase can only wait.
    const k = new KeyLayout(prefix).product('held');
    await client.set(k.lock, 'another-holder', 'PX', 60_000);
    const purchase = request(url, 'POST', '/api/orders', { json: { productId: 'held', userId: 'u1' } }).then(
      (res) => res.body.code as string,
      () => 'no answer',
    );
    // The buyer is waiting for the lock once the app listens for its release (a shard channel).
    while (((await client.pubsub('SHARDNUMSUB', `${k.lock}:released`)) as [string, number])[1] === 0) await sleep(10);

    const sent = Date.now();
    app.kill('SIGTERM');
    expect(await exitWithin(exited, 1_000 + EXIT_SLACK_MS)).toBe(1);
    expect(Date.now() - sent).toBeGreaterThanOrEqual(1_000);
    // It may have been mid-write, as far as the deadline can tell: the truthful answer.
    expect(await purchase).toBe('OUTCOME_UNKNOWN');
    expect(output()).toMatch(
      /shutdown deadline \(1000 ms\) passed: 1 request in progress answered 503 OUTCOME_UNKNOWN: POST \/api\/orders/,
    );
    // Nothing was written: the purchase never got the lock.
    expect(await client.get(k.stock)).toBe('10');
    expect(await client.xlen(k.orders)).toBe(0);
    await client.del(k.lock);
  });
});
