import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../scripts/redis-server';
import { ADMIN_TOKEN, waitForHealth } from './helpers/app';
import { startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

const ROOT = join(__dirname, '..');
const START = join(ROOT, 'scripts', 'start.js');

/**
 * What `npm ci` runs besides installing. swagger-ui-dist (for /docs) depends on
 * @scarf/scarf, whose postinstall reports the install to an analytics service unless
 * the root package.json opts out (scarf's documented `scarfSettings.enabled: false`).
 */
describe('the install', () => {
  it('opts out of install-time analytics (scarfSettings.enabled false in package.json)', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    expect(pkg.scarfSettings).toEqual({ enabled: false });
  });
});

/** The environment of a launcher with none of the app's settings of its own: `set` are. */
function launcherEnv(set: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['REDIS_URL', 'REDIS_CLUSTER', 'REDIS_CLUSTER_NODES', 'DATABASE_URL', 'SETTLE', 'LOCK_STRATEGY']) {
    delete env[name];
  }
  return { ...env, ...set };
}

/**
 * `npm start` in a folder of its own: it reads the `.env` there, says where each
 * setting came from, and runs the app, which reads the same file the same way.
 */
describe('npm start (scripts/start.js): where its settings come from, and what it says', () => {
  let redis: TestRedis;
  let dir: string;

  beforeAll(async () => {
    redis = await startTestRedis();
    dir = mkdtempSync(join(tmpdir(), 'seckill-start-'));
  });

  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await redis?.stop();
  });

  it('says which settings came from .env and which from the environment, and the address the app listens on', async () => {
    const port = await freePort();
    writeFileSync(
      join(dir, '.env'),
      [
        `REDIS_URL=${redis.url}`,
        'SETTLE=off',
        `KEY_PREFIX=${uniquePrefix('start')}`,
        'LOG_LEVEL=info',
        'PORT=1',
        '',
      ].join('\n'),
    );
    const launcher = spawn(process.execPath, [START], {
      cwd: dir,
      env: launcherEnv({ PORT: String(port), HOST: '0.0.0.0', ADMIN_TOKEN }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    launcher.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    launcher.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => launcher.once('exit', resolve));
    try {
      await waitForHealth(`http://127.0.0.1:${port}`, { timeoutMs: 60_000 });
    } finally {
      launcher.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    const said = stderr.split('\n').filter((line) => line.startsWith('[seckill] ') && !/running on Node/.test(line));
    expect(said).toEqual(
      expect.arrayContaining([
        `[seckill] reading ${join(dir, '.env')}: KEY_PREFIX, LOG_LEVEL, REDIS_URL, SETTLE (PORT also set in the environment, which wins)`,
        '[seckill] using REDIS_URL from .env',
        '[seckill] SETTLE=off (from .env): no PostgreSQL; orders stay in Redis only',
        '[seckill] admin token: the ADMIN_TOKEN set in the environment',
      ]),
    );
    // The app took LOG_LEVEL=info (pino's name) from the same file, and says what it bound.
    expect(stdout).toContain(
      `"msg":"seckill listening on 0.0.0.0:${port} (every IPv4 address of this machine; from this machine: http://127.0.0.1:${port})"`,
    );
  }, 90_000);

  it('refuses to share .data/ with another launcher, naming what this one would start there', () => {
    const pidFile = join(ROOT, '.data', 'launcher.pid');
    // Another launcher: this test's own process (alive, and not the launcher), unless a
    // real `npm start` of this checkout holds .data/ now, which is just as good.
    const ours = !existsSync(pidFile);
    if (ours) {
      mkdirSync(join(ROOT, '.data'), { recursive: true });
      writeFileSync(pidFile, String(process.pid));
    }
    try {
      rmSync(join(dir, '.env'), { force: true });
      // Its own Redis: what still needs .data/ is PostgreSQL, which REDIS_URL does not change.
      const run = spawnSync(process.execPath, [START], {
        cwd: dir,
        env: launcherEnv({ REDIS_URL: redis.url, ADMIN_TOKEN }),
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(run.status).toBe(1);
      expect(run.stderr).toMatch(
        /^\[seckill\] another `npm start` \(pid \d+\) is running private servers in \.data\/; stop it first, or set DATABASE_URL \(or SETTLE=off: no settlement\), so that this one starts none there$/m,
      );
      const both = spawnSync(process.execPath, [START], {
        cwd: dir,
        env: launcherEnv({ LOCK_STRATEGY: 'redlock', SETTLE: 'off', ADMIN_TOKEN }),
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(both.status).toBe(1);
      expect(both.stderr).toContain('stop it first, or set REDIS_URL (or REDIS_CLUSTER_NODES), and REDLOCK_URLS, so');
    } finally {
      if (ours) rmSync(pidFile, { force: true });
    }
  }, 90_000);
});
