import { ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { AddressInfo, connect, createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { KeyLayout } from '../src/redis/key-layout';
import { startPrivateRedis } from '../harness/redis';
import { APP_CWD, APP_MAIN, ROOT } from '../harness/paths';
import { freePort } from '../scripts/redis-server';
import { ADMIN_TOKEN, request, startSale, waitForHealth } from './helpers/app';
import { closeClient, startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

/** pino's numbers for the levels LOG_LEVEL names (trace 10 ... fatal 60). */
const PINO = { trace: 10, debug: 20, info: 30, warn: 40, error: 50 };

interface LogLine {
  readonly level: number;
  readonly time: number;
  readonly msg: string;
  readonly context?: string;
  /** The X-Request-Id of the request whose work wrote the line. */
  readonly reqId?: string;
}

/** The built app as a real process, its stdout and stderr kept apart. */
async function startAppProcess(env: Record<string, string>) {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, [APP_MAIN], {
    cwd: APP_CWD,
    env: { ...process.env, ADMIN_TOKEN, ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  await waitForHealth(url, {
    timeoutMs: 20_000,
    failed: () => (child.exitCode === null ? null : `the app exited (${child.exitCode}):\n${stdout}${stderr}`),
  });
  /** Every stdout line, parsed: one that is not JSON with a pino level fails the test here. */
  const lines = (): LogLine[] =>
    stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const parsed = JSON.parse(line) as LogLine;
        expect(parsed).toMatchObject({ level: expect.any(Number), time: expect.any(Number), msg: expect.any(String) });
        return parsed;
      });
  const waitFor = async (pattern: RegExp, timeoutMs = 10_000): Promise<LogLine> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const line = lines().find((l) => pattern.test(l.msg));
      if (line) return line;
      if (Date.now() > deadline) throw new Error(`no log line matched ${pattern}:\n${stdout}${stderr}`);
      await sleep(20);
    }
  };
  return { child, url, exited, lines, waitFor, stderr: () => stderr };
}

/** `count` purchases at once: a burst, as the bench sends them. */
async function burst(url: string, productId: string, count: number): Promise<number[]> {
  const answers = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      request(url, 'POST', '/api/orders', { json: { productId, userId: `burst${i}` } }),
    ),
  );
  return answers.map((a) => a.status);
}

/** Sends `bytes` and never the rest: what the app writes back before it closes the socket. */
function slowRequest(url: string, bytes: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => socket.write(bytes));
    let answer = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (answer += chunk));
    socket.on('error', reject).on('close', () => resolve(answer));
  });
}

/** Sends `head`, then `body` 100 ms later, and reads the answer to the end of the connection. */
function splitRequest(url: string, head: string, body: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.write(head);
      setTimeout(() => socket.write(body), 100);
    });
    let answer = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (answer += chunk));
    socket.on('error', reject).on('close', () => resolve(answer));
  });
}

describe('logs: JSON lines on stdout through nestjs-pino (the built app as a process)', () => {
  let redis: TestRedis;
  const started: ChildProcess[] = [];

  beforeAll(async () => {
    if (!existsSync(APP_MAIN)) throw new Error(`${APP_MAIN} is missing: run \`npm run build\``);
    redis = await startTestRedis();
  });

  afterAll(async () => {
    for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await redis?.stop();
  });

  it('LOG_LEVEL=debug: every line is JSON, a 200-request burst adds none, SIGTERM logs each shutdown step', async () => {
    const app = await startAppProcess({ REDIS_URL: redis.url, KEY_PREFIX: uniquePrefix('logs'), LOG_LEVEL: 'debug' });
    started.push(app.child);
    await app.waitFor(/^seckill listening on /);
    await startSale(app.url, 'hot', 50);
    // The start-up lines (Nest's own among them) are all in, at info.
    expect(app.lines().some((l) => l.level === PINO.info && l.context === 'NestApplication')).toBe(true);
    const before = app.lines().length;

    const statuses = await burst(app.url, 'hot', 200);
    expect(statuses.filter((s) => s === 201)).toHaveLength(50);
    expect(statuses.filter((s) => s === 409)).toHaveLength(150);
    expect((await fetch(`${app.url}/metrics`)).status).toBe(200);
    await sleep(200);
    expect(app.lines().slice(before)).toEqual([]);

    app.child.kill('SIGTERM');
    expect(await app.exited).toBe(0);
    const steps = app.lines().slice(before);
    expect(steps.map((l) => [l.context, l.msg])).toEqual([
      ['Main', expect.stringMatching(/^SIGTERM: finishing in-flight requests, then closing \(at most 8000 ms\)$/)],
      ['Main', 'HTTP server closed: every connection answered and ended'],
      ['Locks', 'lock connections closed'],
      ['Redis', 'connection closed'],
      ['Main', 'exiting with code 0'],
    ]);
    expect(steps.every((l) => l.level === PINO.info)).toBe(true);
    expect(app.stderr()).toBe('');
  }, 60_000);

  it('logs slow clients (408 REQUEST_TIMEOUT) as one warning per burst with its count: no error, no stack', async () => {
    const app = await startAppProcess({
      REDIS_URL: redis.url,
      KEY_PREFIX: uniquePrefix('slow'),
      LOG_LEVEL: 'debug',
      REQUEST_TIMEOUT_MS: '1000',
    });
    started.push(app.child);
    await app.waitFor(/^seckill listening on /);
    const before = app.lines().length;
    const halfBody =
      'POST /api/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"productId":';
    const halfHeaders = 'POST /api/orders HTTP/1.1\r\nHost: x\r\nContent-Ty';
    const answers = await Promise.all(
      [halfBody, halfBody, halfBody, halfBody, halfHeaders, halfHeaders].map((bytes) => slowRequest(app.url, bytes)),
    );
    for (const answer of answers) expect(answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    // The burst's count comes once its window (10 s) has passed.
    await app.waitFor(/^REQUEST_TIMEOUT: /, 15_000);
    const said =
      'a request did not arrive within REQUEST_TIMEOUT_MS (1000 ms): answered 408 REQUEST_TIMEOUT and closed';
    expect(
      app
        .lines()
        .slice(before)
        .map((l) => [l.level, l.context, l.msg]),
    ).toEqual([
      [PINO.warn, 'HTTP', said],
      [PINO.warn, 'HTTP', `REQUEST_TIMEOUT: 5 more times in the 10 s after: ${said}`],
    ]);
    app.child.kill('SIGTERM');
    expect(await app.exited).toBe(0);
  }, 60_000);

  it("puts a request's X-Request-Id on the lines its work writes (reqId), and on no other line", async () => {
    const own = await startPrivateRedis();
    const redisClient = new Redis(own.url);
    try {
      const app = await startAppProcess({ REDIS_URL: own.url, KEY_PREFIX: uniquePrefix('reqid'), LOG_LEVEL: 'debug' });
      started.push(app.child);
      await app.waitFor(/^seckill listening on /);
      await startSale(app.url, 'full', 5);
      const before = app.lines().length;
      // Every write refused: each purchase's refusal is a warning (once per burst) of ErrorFilter's.
      await redisClient.config('SET', 'maxmemory', '1');
      // The body a moment after the headers, as a slow network delivers it: Node emits it
      // from the socket, outside the context the request began in.
      const body = JSON.stringify({ productId: 'full', userId: 'u1' });
      const first = await splitRequest(
        app.url,
        `POST /api/orders HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${body.length}\r\n\r\n`,
        body,
      );
      const second = await request(app.url, 'POST', '/api/orders', { json: { productId: 'full', userId: 'u2' } });
      await redisClient.config('SET', 'maxmemory', '0');
      expect(first).toMatch(/^HTTP\/1\.1 503 .*"code":"REDIS_OUT_OF_MEMORY"/s);
      expect(second.body.code).toBe('REDIS_OUT_OF_MEMORY');
      const id = /\r\nx-request-id: ([^\r]+)\r\n/i.exec(first)?.[1];
      expect(id).toMatch(/^[\w-]{8}-[0-9a-z]+$/);
      expect(second.headers.get('x-request-id')).not.toBe(id);
      const refused = await app.waitFor(/^Redis refused a command \(REDIS_OUT_OF_MEMORY\)/);
      expect(refused).toMatchObject({ level: PINO.warn, context: 'ErrorFilter', reqId: id });
      // The burst's count, 10 s on, is no request's line, though the first one's work set its timer.
      const counted = await app.waitFor(/^REDIS_OUT_OF_MEMORY: 1 more time in the 10 s after/, 15_000);
      expect(counted.reqId).toBeUndefined();
      // Nothing else carries an id: start-up, the dashboard's timer (whose publish the same
      // Redis may have refused meanwhile).
      expect(app.lines().filter((l) => l.reqId !== undefined)).toEqual([refused]);
      expect(app.lines().slice(before)).toEqual(expect.arrayContaining([refused, counted]));
      app.child.kill('SIGTERM');
      expect(await app.exited).toBe(0);
    } finally {
      await closeClient(redisClient);
      await own.remove();
    }
  }, 60_000);

  it("a live stream's request leaves the log once the stream begins: the product's shared poll writes no request's id", async () => {
    const prefix = uniquePrefix('sse-reqid');
    const app = await startAppProcess({ REDIS_URL: redis.url, KEY_PREFIX: prefix, LOG_LEVEL: 'debug' });
    started.push(app.child);
    await app.waitFor(/^seckill listening on /);
    await startSale(app.url, 'watched', 5);
    const stream = new AbortController();
    const res = await fetch(`${app.url}/api/live/watched`, { signal: stream.signal });
    expect(res.headers.get('x-request-id')).toMatch(/^[\w-]{8}-[0-9a-z]+$/);
    const client = new Redis(redis.url);
    try {
      // Every poll of the product now fails (its meta is no hash), and says so at debug.
      await client.del(new KeyLayout(prefix).product('watched').meta);
      await client.set(new KeyLayout(prefix).product('watched').meta, 'x');
      const failed = await app.waitFor(/^live read of watched failed/);
      expect(failed.reqId).toBeUndefined();
      expect(app.lines().filter((l) => l.reqId !== undefined)).toEqual([]);
    } finally {
      stream.abort();
      await closeClient(client);
      app.child.kill('SIGTERM');
      await app.exited;
    }
  }, 30_000);

  it('writes each line before the next statement runs (synchronously), so none is overtaken or lost at exit', async () => {
    // The logger as nestjs-pino builds it (pino-http from the app's own logParams, built),
    // then a raw write to the same fd and an exit. An asynchronous destination still has
    // the second line in its buffer (the first one's write has not called back) when the
    // raw write goes out: it would come after the marker, or not at all.
    const script = `
      const { logParams } = require(${JSON.stringify(join(dirname(APP_MAIN), 'telemetry', 'log-params.js'))});
      const { pinoHttp } = require('pino-http');
      const params = logParams({ logLevel: 'log' }).pinoHttp;
      const logger = (Array.isArray(params) ? pinoHttp(...params) : pinoHttp(params)).logger;
      logger.info('one');
      logger.info('two');
      require('node:fs').writeSync(1, 'marker\\n');
      process.exit(0);
    `;
    const child = spawn(process.execPath, ['-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
    expect([code, stderr]).toEqual([0, '']);
    const order = stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => (line === 'marker' ? line : (JSON.parse(line) as LogLine).msg));
    expect(order).toEqual(['one', 'two', 'marker']);
  });

  it('a failure to start once the app exists is JSON lines on stdout (the port taken), nothing plain on stderr', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      const child = spawn(process.execPath, [APP_MAIN], {
        cwd: APP_CWD,
        env: {
          ...process.env,
          ADMIN_TOKEN,
          REDIS_URL: redis.url,
          KEY_PREFIX: uniquePrefix('taken'),
          PORT: String(port),
          HOST: '127.0.0.1',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      started.push(child);
      let stdout = '';
      let stderr = '';
      child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      const code = await new Promise<number | null>((resolve) => child.once('close', (c) => resolve(c)));
      expect(code).toBe(1);
      expect(stderr).toBe('');
      const lines = stdout
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as LogLine);
      expect(lines.filter((l) => l.context === 'Main').map((l) => [l.level, l.msg])).toEqual([
        [PINO.error, expect.stringMatching(/^failed to start: listen EADDRINUSE/)],
        [PINO.info, 'exiting with code 1'],
      ]);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  }, 30_000);

  it('LOG_LEVEL=warn: only warnings and errors; a Redis outage is one warning, its end one line (shown at debug)', async () => {
    const own = await startPrivateRedis();
    const env = { REDIS_URL: own.url, KEY_PREFIX: uniquePrefix('outage') };
    const quiet = await startAppProcess({ ...env, LOG_LEVEL: 'warn' });
    const chatty = await startAppProcess({ ...env, LOG_LEVEL: 'debug' });
    started.push(quiet.child, chatty.child);
    try {
      await chatty.waitFor(/^seckill listening on /);
      await own.stop();
      // ioredis retries every few ms to 2 s: several failed reconnects, one line each.
      await quiet.waitFor(/^unavailable: /);
      await chatty.waitFor(/^unavailable: /);
      await sleep(1_000);
      const again = await startPrivateRedis({ port: own.port, dir: own.dir });
      try {
        const back = await chatty.waitFor(/^connected to redis:\/\/127\.0\.0\.1:\d+ \(unavailable for \d+ ms\)$/);
        expect(back).toMatchObject({ level: PINO.info, context: 'Redis' });
        await waitForHealth(quiet.url);
        for (const app of [quiet, chatty]) {
          expect(app.lines().filter((l) => l.msg.startsWith('unavailable: '))).toEqual([
            expect.objectContaining({ level: PINO.warn, context: 'Redis' }),
          ]);
        }
        // warn: nothing below warn at all, from start-up to exit.
        quiet.child.kill('SIGTERM');
        expect(await quiet.exited).toBe(0);
        expect(quiet.lines().filter((l) => l.level < PINO.warn)).toEqual([]);
        expect(quiet.lines().length).toBeGreaterThan(0);
        chatty.child.kill('SIGTERM');
        expect(await chatty.exited).toBe(0);
      } finally {
        await again.remove();
      }
    } finally {
      await own.remove();
    }
  }, 60_000);
});
