import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { PrivatePostgres, startPrivatePostgres } from '../harness/postgres';
import { RunningApp, startApp } from '../harness/processes';
import { runBench, useBenchDir } from './helpers/bench';
import { startTestRedis, TestRedis, useTestRedis } from './helpers/redis';

const ROOT = join(__dirname, '..');
const BENCH = join(ROOT, 'scripts', 'bench.js');
const TOKEN = 'the-deployments-admin-token';
const PREFIX = 'shop:';

/**
 * `npm run bench -- --target`: a deployment the user started, two instances of the built
 * app (`node dist/src/main.js`) on one Redis and one PostgreSQL of their own, loaded and
 * judged without the bench starting or deleting anything of theirs.
 */
describe('bench --target: a deployment already running', () => {
  jest.setTimeout(180_000);
  const benchDir = useBenchDir();
  const redis = useTestRedis();
  let postgres: PrivatePostgres;
  let database: string;
  let apps: RunningApp[] = [];
  /** A Redis of its own, not the deployment's. */
  let stranger: TestRedis;

  beforeAll(async () => {
    postgres = await startPrivatePostgres();
    database = await postgres.createDatabase('deployment');
    const env = { REDIS_URL: redis.url(), DATABASE_URL: database, ADMIN_TOKEN: TOKEN, KEY_PREFIX: PREFIX };
    apps = await Promise.all([1, 2].map(() => startApp({ env })));
    stranger = await startTestRedis();
  });
  afterAll(async () => {
    await stranger?.stop();
    await Promise.all(apps.map((a) => a.stop()));
    await postgres?.remove();
  });

  const target = () => apps.map((a) => a.url).join(',');
  /** The deployment as the user names it: both instances, its token and its Redis. */
  const deployment = () => ['--target', target(), '--admin-token', TOKEN, '--redis', redis.url()];
  /** The bench run as a user runs it, exit code and both streams. */
  const bench = (args: string[]) =>
    spawnSync(process.execPath, [BENCH, ...args, '--out', join(benchDir(), 'refused.json')], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });

  it('sells its own product over both instances, judges it from their Redis and PostgreSQL, and leaves a key of another prefix as it was', async () => {
    const admin = redis.client();
    await admin.set('other:canary', 'theirs');
    const out = join(benchDir(), 'target.json');
    const { run, report } = runBench(
      [...deployment(), '--database', database, '--key-prefix', PREFIX, '--buyers', '300', '--stock', '30'].concat([
        '--connections',
        '20',
        '--warmup',
        '100',
      ]),
      out,
      120_000,
    );
    expect(report.rows).toHaveLength(1);
    const [row] = report.rows;
    expect(row).toMatchObject({ strategy: 'fenced', label: 'fenced @ 2 URLs', pass: true, sold: 30, unsafe: false });
    expect(row.settlement).toMatchObject({ rows: 30 });
    expect(Object.values(row.invariants).every(Boolean)).toBe(true);
    expect(row.cost.appCpuUsPerRequest).toBeNull();
    expect(run.stderr).toMatch(/runs fenced \(its \/health\); the app's CPU was not measured/);
    const id = /left behind: the products bench-\w+-warmup, (bench-\w+), and their orders in PostgreSQL/.exec(
      run.stderr,
    )?.[1];
    expect(id).toBeDefined();
    expect(await admin.get('other:canary')).toBe('theirs');
    // Nothing of the run deleted: its product is still there, under the deployment's prefix, for the user to retire.
    expect(await admin.exists(`${PREFIX}{p:${id}}:meta`)).toBe(1);
    // Both instances served buyers (their own count, /metrics): each was sent its share.
    expect(row.requests).toBe(300);
    for (const app of apps) {
      const metrics = await (await fetch(`${app.url}/metrics`)).text();
      const served = [...metrics.matchAll(/^seckill_purchases_total\{[^}]*\} (\d+)$/gm)].reduce(
        (a, m) => a + Number(m[1]),
        0,
      );
      expect({ [app.url]: served >= 150 }).toEqual({ [app.url]: true });
    }
  });

  it.each([
    [
      'an unreachable URL',
      (t: string) => ['--target', `${t},http://127.0.0.1:1`],
      /--target http:\/\/127\.0\.0\.1:1 is unreachable/,
    ],
    [
      'a wrong admin token',
      (t: string) => ['--target', t, '--admin-token', 'wrong'],
      /--admin-token: .* refused it \(401/,
    ],
    [
      'a Redis that is not the deployment’s',
      (t: string) => ['--target', t, '--redis', stranger.url],
      /--redis redis:\/\/\S+ is not the deployment's Redis: its product bench-\w+ did not appear there/,
    ],
    [
      'another key prefix',
      (t: string) => ['--target', t, '--key-prefix', 'seckill:'],
      /--key-prefix: the deployment writes under "shop:", not "seckill:"/,
    ],
  ])('refuses %s in one line, exit code 2, before any load', async (_, args, said) => {
    const given = args(target());
    const defaults: Record<string, string> = { '--admin-token': TOKEN, '--redis': redis.url(), '--key-prefix': PREFIX };
    for (const [flag, value] of Object.entries(defaults)) if (!given.includes(flag)) given.push(flag, value);
    const before = new Set(await redis.client().keys(`${PREFIX}*`));
    const run = bench([...given, '--buyers', '50', '--stock', '5', '--warmup', '0']);
    expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 2, stderr: expect.stringMatching(said) });
    expect(
      run.stderr
        .trim()
        .split('\n')
        .filter((l) => l.startsWith('[bench] refused')),
    ).toHaveLength(1);
    // No sale started, and the product it PUT to check retired again: of its keys only the
    // fencing counter stays, which DELETE keeps by design (docs/api.md "Retiring a product").
    expect(run.stdout).toBe('');
    const added = (await redis.client().keys(`${PREFIX}*`)).filter((k) => !before.has(k));
    expect(added.filter((k) => !/^shop:\{p:bench-\w+\}:fence$/.test(k))).toEqual([]);
  });

  it('refuses options a deployment decides itself, naming them', () => {
    const run = bench([...deployment(), '--workers', '2', '--settle', 'off']);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/--target runs against a deployment as it is: not with --workers, --settle/);
  });
});
