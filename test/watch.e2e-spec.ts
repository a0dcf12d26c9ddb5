import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../scripts/redis-server';
import { ADMIN_TOKEN, waitForHealth } from './helpers/app';
import { startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

/**
 * `npm run start:dev`: the launcher runs `nest start --watch`, which runs the app.
 * It rebuilds dist/ (deleting it first), so scripts/test.js runs this file alone,
 * never beside a file that starts dist/src/main.js.
 */
describe('npm run start:dev (nest start --watch)', () => {
  let redis: TestRedis;

  beforeAll(async () => {
    redis = await startTestRedis();
  });

  afterAll(() => redis?.stop());

  it.each(['SIGTERM', 'SIGHUP'] as const)(
    'stops whole on %s: nest and its app are gone before the launcher exits',
    async (signal) => {
      const marker = uniquePrefix('watch');
      const port = await freePort();
      const launcher = spawn(process.execPath, [join(__dirname, '..', 'scripts', 'start.js'), '--watch'], {
        env: {
          ...process.env,
          REDIS_URL: redis.url,
          KEY_PREFIX: marker,
          ADMIN_TOKEN,
          PORT: String(port),
          HOST: '127.0.0.1',
        },
        stdio: 'ignore',
      });
      const exited = new Promise<number | null>((resolve) => launcher.once('exit', (code) => resolve(code)));
      try {
        await waitForHealth(`http://127.0.0.1:${port}`, { timeoutMs: 60_000 });
        // The launcher, nest, and the app nest runs all carry the marker.
        expect(processesWith(marker).length).toBeGreaterThanOrEqual(3);
        launcher.kill(signal);
        expect(await exited).toBe(0);
        // Not "soon after": by the time the launcher exits (and would stop an embedded
        // Redis), the app has finished draining and is gone.
        expect(processesWith(marker)).toEqual([]);
      } finally {
        for (const pid of processesWith(marker)) process.kill(pid, 'SIGKILL');
        if (launcher.exitCode === null) launcher.kill('SIGKILL');
      }
    },
    90_000,
  );
});

/** Pids of live processes whose environment contains `marker` (Linux /proc). */
function processesWith(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue; // exited, not yet reaped
      if (readFileSync(`/proc/${entry}/environ`, 'utf8').includes(marker)) pids.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}
