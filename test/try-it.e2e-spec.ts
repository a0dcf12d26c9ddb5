import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PrivatePostgres, startPrivatePostgres } from '../harness/postgres';
import { RunningApp, startApp } from '../harness/processes';
import { ADMIN_TOKEN } from './helpers/app';
import { startTestRedis, TestRedis, uniquePrefix } from './helpers/redis';

const API_MD = join(__dirname, '..', 'docs', 'api.md');

/** docs/api.md's "Try it": its shell block as written, and the output it shows. */
function tryIt(): { script: string; output: string } {
  const page = readFileSync(API_MD, 'utf8');
  const section = page.slice(page.indexOf('## Try it\n'), page.indexOf('\n## ', page.indexOf('## Try it\n') + 1));
  const script = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  const output = /```text\n([\s\S]*?)```/.exec(section)?.[1];
  if (!script || !output) throw new Error('docs/api.md "Try it" lost its sh or its text block');
  return { script, output };
}

/** What differs from run to run: order ids and Redis's clock. */
function normal(output: string): string {
  return output
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
    .replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/g, '<time>')
    .trim();
}

/**
 * docs/api.md's "Try it" session, run as it is written (bash and curl) against the
 * built app as `npm start` runs it (settlement into a private PostgreSQL, the default
 * 15-minute payment deadline), twice: the first run's output is the one the page shows,
 * and the second, on the sale the first left with reservations, goes just as well.
 */
describe('docs/api.md, Try it', () => {
  let redis: TestRedis;
  let pg: PrivatePostgres;
  let app: RunningApp;

  beforeAll(async () => {
    [redis, pg] = await Promise.all([startTestRedis(), startPrivatePostgres()]);
    app = await startApp({
      env: {
        REDIS_URL: redis.url,
        KEY_PREFIX: uniquePrefix('try-it'),
        ADMIN_TOKEN,
        DATABASE_URL: await pg.createDatabase(`try_it_${process.pid}`),
        LOG_LEVEL: 'error',
      },
    });
  }, 60_000);

  afterAll(async () => {
    await app?.stop();
    await Promise.all([redis?.stop(), pg?.remove()]);
  });

  const run = () =>
    execFileSync('bash', ['-c', tryIt().script], {
      env: { ...process.env, TOKEN: ADMIN_TOKEN, URL: app.url },
      encoding: 'utf8',
    });

  it('answers as the page shows, and again on a second run: the close settles what the first left', () => {
    const first = run();
    expect(normal(first)).toBe(normal(tryIt().output));
    const second = run().trim().split('\n');
    const [close, ...rest] = second;
    // The first run left four reservations (user1's order is paid): cancelled, all settled.
    expect(JSON.parse(close.replace(/ \d{3}$/, ''))).toMatchObject({
      product: { id: 'phone', stock: 4, orders: 6 },
      cancelled: 4,
      unsettled: 0,
    });
    expect(close).toMatch(/ 200$/);
    expect(normal(rest.join('\n'))).toBe(normal(first).split('\n').slice(1).join('\n'));
  }, 60_000);
});
