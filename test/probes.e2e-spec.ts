import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { connect, Socket } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'yaml';
import { APP_MAIN, ROOT } from '../harness/paths';
import { RunningApp, startApp } from '../harness/processes';
import { ADMIN_TOKEN, request } from './helpers/app';
import { startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

/**
 * GET /health/live and /health/ready on the built app as `npm start` runs it
 * (dist/src/main.js), against a real redis-server: liveness never asks Redis,
 * readiness says whether to send buyers, and turns 503 the moment a shutdown starts.
 */
describe('liveness and readiness probes (the built app as a process)', () => {
  let redis: TestRedis;
  let app: RunningApp | undefined;

  beforeAll(() => {
    if (!existsSync(APP_MAIN)) throw new Error('dist/src/main.js is missing: run `npm test` (it builds first)');
  });

  beforeEach(async () => {
    redis = await startTestRedis();
    app = await startApp({ env: { REDIS_URL: redis.url, KEY_PREFIX: uniquePrefix('probes'), ADMIN_TOKEN } });
  });

  afterEach(async () => {
    await app?.stop();
    await redis?.stop();
  });

  it('with Redis up: live 200 and ready 200; Redis stopped: live 200, ready 503 with Retry-After', async () => {
    const live = await request(app!.url, 'GET', '/health/live');
    expect(live.status).toBe(200);
    expect(live.body).toEqual({ status: 'ok' });
    const ready = await request(app!.url, 'GET', '/health/ready');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ready', redis: 'up' });

    await redis.stop();
    await sleep(3_000);
    const liveAfter = await request(app!.url, 'GET', '/health/live');
    expect(liveAfter.status).toBe(200);
    expect(liveAfter.body).toEqual({ status: 'ok' });
    const readyAfter = await request(app!.url, 'GET', '/health/ready');
    expect(readyAfter.status).toBe(503);
    expect(readyAfter.headers.get('retry-after')).toBe('1');
    expect(readyAfter.body).toEqual({ status: 'unavailable', reason: 'Redis does not answer', redis: 'down' });
    // docker-compose.yml's healthcheck, run as Docker runs it (its port made this app's): healthy.
    expect(composeHealthcheck(app!.url)).toEqual({ status: 0, stderr: '' });
    // /health keeps its own answer and body.
    const health = await request(app!.url, 'GET', '/health');
    expect(health.status).toBe(503);
    expect(health.body).toMatchObject({ status: 'unavailable', redis: 'down', strategy: 'fenced' });
  }, 30_000);

  it('on SIGTERM: ready 503 draining at once, live 200, for requests the draining server still answers', async () => {
    const port = Number(new URL(app!.url).port);
    // Requests begun before the signal (their first bytes sent): the server answers them
    // before it closes, as it would a load balancer's probe on a connection in use.
    const begun = ['/health/ready', '/health/live'].map((path) => beginRequest(port, path));
    await Promise.all(begun.map((r) => r.sent));
    process.kill(app!.pid, 'SIGTERM');
    while (!app!.tail().includes('SIGTERM: finishing in-flight requests')) await sleep(10);

    const [ready, live] = await Promise.all(begun.map((r) => r.finish()));
    expect(ready.status).toBe(503);
    expect(ready.headers['retry-after']).toBe('1');
    expect(ready.headers.connection).toBe('close');
    expect(JSON.parse(ready.body)).toMatchObject({ status: 'draining' });
    expect(live.status).toBe(200);
    expect(JSON.parse(live.body)).toEqual({ status: 'ok' });
    expect(await app!.stop()).toBe(0);
  }, 30_000);
});

/**
 * A GET whose request line and first header are sent now, the end of its headers only on
 * `finish()`: until then the server holds the connection as busy, not idle (a server
 * that begins closing drops idle keep-alive connections, and waits for busy ones).
 */
function beginRequest(port: number, path: string) {
  const socket: Socket = connect(port, '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const sent = new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n`, () => resolve());
  }).then(() => sleep(100)); // read by the server
  const finish = async () => {
    socket.write('\r\n');
    await closed;
    const [head, body] = received.split('\r\n\r\n');
    const [statusLine, ...lines] = head.split('\r\n');
    const headers = Object.fromEntries(
      lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]),
    );
    return { status: Number(statusLine.split(' ')[1]), headers, body };
  };
  return { sent, finish };
}

/** docker-compose.yml's app healthcheck (`CMD node -e <script>`) run against `url`: its exit status. */
function composeHealthcheck(url: string): { status: number | null; stderr: string } {
  const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
    services: Record<string, { healthcheck?: { test?: string[] } }>;
  };
  const [, node, flag, script] = compose.services.app.healthcheck?.test ?? [];
  expect([node, flag]).toEqual(['node', '-e']);
  const run = spawnSync(process.execPath, [flag, script.replace('http://127.0.0.1:3000', url)], {
    encoding: 'utf8',
    timeout: 10_000,
  });
  return { status: run.status, stderr: run.stderr };
}
