import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startPrivateNginx } from '../harness/nginx';
import { PrivatePostgres, startPrivatePostgres } from '../harness/postgres';
import { RunningApp, startApp } from '../harness/processes';
import { runBench, useBenchDir } from './helpers/bench';
import { PrivateCluster, startPrivateCluster } from '../harness/redis';
import { startTestRedis, TestRedis, useTestRedis } from './helpers/redis';
import { findNginx, NGINX_ENV } from '../scripts/nginx';

const ROOT = join(__dirname, '..');
const BENCH = join(ROOT, 'scripts', 'bench.js');
const TOKEN = 'the-deployments-admin-token';
const PREFIX = 'shop:';
/** The third instance's BUYER_AUTH=hs256:<secret> and claims: a deployment that checks buyer tokens. */
const BUYERS = { secret: randomBytes(32).toString('base64url'), issuer: 'https://id.example', audience: 'seckill' };

/** Purchases an instance has served so far, by its own count (/metrics). */
async function served(url: string): Promise<number> {
  const metrics = await (await fetch(`${url}/metrics`)).text();
  return [...metrics.matchAll(/^seckill_purchases_total\{[^}]*\} (\d+)$/gm)].reduce((a, m) => a + Number(m[1]), 0);
}

/** Requests an instance has answered on `route` (its pattern) with `method`, by its own count (/metrics). */
async function answered(url: string, method: string, route: string): Promise<number> {
  const metrics = await (await fetch(`${url}/metrics`)).text();
  return [...metrics.matchAll(/^seckill_http_request_duration_seconds_count\{([^}]*)\} (\d+)$/gm)]
    .filter((m) => m[1].includes(`method="${method}"`) && m[1].includes(`route="${route}"`))
    .reduce((a, m) => a + Number(m[2]), 0);
}

/** Without nginx the test behind it is one skipped test whose name says why, as the browser tests do without Chromium. */
const nginxBin = findNginx();

/** --auth hs256 with a BUYER_AUTH secret, and the claims the checking instance wants. */
const buyerAuth = (secret: string) => [
  '--auth',
  'hs256',
  '--buyer-secret',
  secret,
  '--buyer-issuer',
  BUYERS.issuer,
  '--buyer-audience',
  BUYERS.audience,
];
const withNginx = nginxBin ? it : it.skip;
const behindNginx = (name: string) =>
  nginxBin
    ? name
    : `${name}: needs nginx (${process.env[NGINX_ENV] ? `${NGINX_ENV}=${process.env[NGINX_ENV]} is not an executable file` : "none at /usr/sbin/nginx or on PATH; npm test installs Debian's nginx as root"})`;

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
  /** An instance of the same deployment that checks buyer tokens (BUYER_AUTH). */
  let checking: RunningApp;
  /** A Redis of its own, not the deployment's. */
  let stranger: TestRedis;

  beforeAll(async () => {
    postgres = await startPrivatePostgres();
    database = await postgres.createDatabase('deployment');
    const env = { REDIS_URL: redis.url(), DATABASE_URL: database, ADMIN_TOKEN: TOKEN, KEY_PREFIX: PREFIX };
    apps = await Promise.all([1, 2].map(() => startApp({ env })));
    const buyerAuth = {
      BUYER_AUTH: `hs256:${BUYERS.secret}`,
      BUYER_AUTH_ISSUER: BUYERS.issuer,
      BUYER_AUTH_AUDIENCE: BUYERS.audience,
    };
    checking = await startApp({ env: { ...env, ...buyerAuth } });
    stranger = await startTestRedis();
  });
  afterAll(async () => {
    await stranger?.stop();
    await Promise.all([...apps, checking].map((a) => a?.stop()));
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

  /** The small sale the passing tests run at `url`, judged from the deployment's Redis and PostgreSQL: its row, which must pass. */
  const sellAt = (url: string, name: string, more: string[] = [], stores = { redis: redis.url(), database }) => {
    const size = ['--buyers', '300', '--stock', '30', '--connections', '20', '--warmup', '100'];
    const { run, report } = runBench(
      [
        '--target',
        url,
        '--admin-token',
        TOKEN,
        '--redis',
        stores.redis,
        '--database',
        stores.database,
        '--key-prefix',
        PREFIX,
      ].concat(size, more),
      join(benchDir(), `${name}.json`),
      120_000,
    );
    expect(report.rows).toHaveLength(1);
    const [row] = report.rows;
    expect(row).toMatchObject({ strategy: 'fenced', pass: true, sold: 30, unsafe: false });
    expect(Object.values(row.invariants).every(Boolean)).toBe(true);
    return { run, row };
  };

  it('sells its own product over both instances, judges it from their Redis and PostgreSQL, and leaves a key of another prefix as it was', async () => {
    const admin = redis.client();
    await admin.set('other:canary', 'theirs');
    const { run, row } = sellAt(target(), 'target');
    expect(row).toMatchObject({ label: 'fenced @ 2 URLs', requests: 300, settlement: { rows: 30 } });
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
    for (const app of apps) expect({ [app.url]: (await served(app.url)) >= 150 }).toEqual({ [app.url]: true });
  });

  it('pays, cancels and lets expire through the deployment (paid with its admin token), then resells the units returned, judged as a row of its own is', async () => {
    const { run, row } = sellAt(target(), 'pay', ['--pay', '0.5', '--payment-timeout', '3000']);
    const { paid, cancelled, leftToExpire, secondWave } = row.settlement.afterlife;
    // Half the first wave's orders paid, half the rest cancelled (their units sold again in
    // the pass), the others expired by the deployment's sweeper; then twice the units
    // left in stock come as a second wave, and each unit is bought and paid.
    expect(row.settlement.afterlife).toMatchObject({ refused: {} });
    const unpaid = cancelled + leftToExpire;
    expect({ paid, cancelled }).toEqual({ paid: Math.floor((paid + unpaid) / 2), cancelled: Math.ceil(unpaid / 2) });
    expect(secondWave).toEqual({ buyers: 2 * secondWave.created, created: expect.any(Number), refused: {} });
    expect(row.settlement.byStatus).toEqual({ paid: paid + secondWave.created, cancelled, expired: leftToExpire });
    expect(run.stderr).toContain(`--pay 0.5: ${paid} paid, ${cancelled} cancelled, ${leftToExpire} left to expire`);
  });

  it.each([
    [
      'through its waiting room',
      ['--queue', '500'],
      // Each buyer joins once, at the instance it was dealt: 150 of the sale's and 50 of the warm-up's at each.
      async (url: string) => answered(url, 'POST', '/api/products/:id/queue'),
      200,
      /fenced queue-500\/s @ 2 URLs: through the waiting room at 500\/s: 300 joins, .* every order an admitted buyer's/,
    ],
    [
      'before its start, in waves until it opens',
      ['--starts-in', '1500'],
      // The first wave sends every buyer once, half at each instance; the waves after it send those told to wait.
      async (url: string) => answered(url, 'POST', '/api/orders'),
      200,
      /opened at \S+ \(Redis's clock\): \d+ answers SALE_NOT_STARTED over \d+ waves; .* none before the start$/m,
    ],
  ])(
    'sells %s over both instances, each buyer at one of them, judged as at one URL',
    async (_, more, count, least, said) => {
      const before = await Promise.all(apps.map((a) => count(a.url)));
      const { run } = sellAt(target(), `spread-${more[0].slice(2)}`, more);
      expect(run.stderr).toMatch(said);
      const after = await Promise.all(apps.map((a) => count(a.url)));
      expect(apps.map((a, i) => ({ [a.url]: after[i] - before[i] >= least }))).toEqual(
        apps.map((a) => ({ [a.url]: true })),
      );
    },
  );

  it("sells to buyers with tokens minted with the deployment's BUYER_AUTH secret and claims", async () => {
    const { row } = sellAt(checking.url, 'auth', buyerAuth(BUYERS.secret));
    expect(row).toMatchObject({
      label: 'fenced auth-hs256 @ 1 URL',
      auth: 'hs256',
      codes: { CREATED: 30, SOLD_OUT: 270 },
    });
  });

  withNginx(
    behindNginx(
      'sells its own product through one nginx in front of both instances (round robin), judged as a list of URLs is',
    ),
    async () => {
      const nginx = await startPrivateNginx(
        join(benchDir(), 'nginx'),
        apps.map((a) => a.url),
      );
      try {
        const before = await Promise.all(apps.map((a) => served(a.url)));
        const { run, row } = sellAt(nginx.url, 'nginx');
        expect(row).toMatchObject({ label: 'fenced @ 1 URL', requests: 300, settlement: { rows: 30 } });
        expect(run.stderr).toContain(`the deployment at ${nginx.url} runs fenced`);
        // nginx dealt the buyers to both instances: each served a share of the warm-up's and the sale's 400 requests.
        const after = await Promise.all(apps.map((a) => served(a.url)));
        const shares = apps.map((a, i) => ({ [a.url]: after[i] - before[i] >= 100 }));
        expect(shares).toEqual(apps.map((a) => ({ [a.url]: true })));
      } finally {
        await nginx.stop();
      }
    },
  );

  withNginx(
    behindNginx('refuses an nginx with no instance behind it (its 502 page) in one line, exit code 2'),
    async () => {
      const nginx = await startPrivateNginx(join(benchDir(), 'nginx-alone'), ['http://127.0.0.1:1']);
      try {
        const run = bench([...deployment().slice(2), '--target', nginx.url, '--buyers', '50', '--warmup', '0']);
        expect({ status: run.status, stderr: run.stderr.trim() }).toEqual({
          status: 2,
          stderr: expect.stringMatching(
            /^\[bench\] refused: --target http:\S+: GET \/health answered 502 without a strategy: not this app, or none behind it$/m,
          ),
        });
      } finally {
        await nginx.stop();
      }
    },
  );

  withNginx(
    behindNginx('starts an nginx older than 1.19.5 (Debian 11, Ubuntu 22.04: 1.18), which has no -e flag'),
    async () => {
      // This nginx, answering -v and -e as 1.18 does ("invalid option"), anything else as itself.
      const dir = join(benchDir(), 'nginx-1.18-bin');
      mkdirSync(dir, { recursive: true });
      const old = join(dir, 'nginx');
      writeFileSync(
        old,
        `#!/bin/sh\ncase " $* " in\n  *" -v "*) echo "nginx version: nginx/1.18.0" >&2; exit 0;;\n` +
          `  *" -e "*) echo 'nginx: invalid option: "e"' >&2; exit 1;;\nesac\nexec ${nginxBin} "$@"\n`,
      );
      chmodSync(old, 0o755);
      const chosen = process.env[NGINX_ENV];
      process.env[NGINX_ENV] = old;
      try {
        // On main: "nginx on port N exited (1)", its 'invalid option: "e"' the test's failure.
        const nginx = await startPrivateNginx(join(benchDir(), 'nginx-1.18'), [apps[0].url]);
        try {
          expect((await fetch(`${nginx.url}/health`)).status).toBe(200);
        } finally {
          await nginx.stop();
        }
      } finally {
        if (chosen === undefined) delete process.env[NGINX_ENV];
        else process.env[NGINX_ENV] = chosen;
      }
    },
  );

  describe('on a Redis Cluster', () => {
    let cluster: PrivateCluster;
    let onCluster: RunningApp;
    let clusterDatabase: string;
    beforeAll(async () => {
      cluster = await startPrivateCluster({ masters: 3 });
      clusterDatabase = await postgres.createDatabase('on_cluster');
      const env = { DATABASE_URL: clusterDatabase, ADMIN_TOKEN: TOKEN, KEY_PREFIX: PREFIX };
      onCluster = await startApp({ env: { ...env, REDIS_CLUSTER_NODES: cluster.clusterNodes } });
    });
    afterAll(async () => {
      await onCluster?.stop();
      await cluster?.remove();
    });

    it('sells through an instance on a Redis Cluster, --redis naming one of its nodes: read and metered on every master', async () => {
      const seed = cluster.nodes[1].url;
      const { run, row } = sellAt(onCluster.url, 'cluster', [], { redis: seed, database: clusterDatabase });
      expect(row).toMatchObject({ label: 'fenced @ 1 URL', settlement: { rows: 30 } });
      const masters = cluster.nodes.map((n) => `127.0.0.1:${n.port}`);
      expect(run.stderr).toContain(
        `--redis 127.0.0.1:${cluster.nodes[1].port} is a node of a Redis Cluster: its masters`,
      );
      expect(row.cost.shards.map((s: { node: string }) => s.node).sort()).toEqual(masters.sort());
    });
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
    [
      'a deployment that checks buyer tokens, given none',
      () => ['--target', checking.url],
      /--auth: the deployment checks buyer tokens \(BUYER_AUTH\): give --auth hs256 with its --buyer-secret/,
    ],
    [
      'buyer tokens of another secret',
      () => ['--target', checking.url, ...buyerAuth('x'.repeat(40))],
      /--buyer-secret, --buyer-issuer, --buyer-audience: \S+ refused a token minted with them \(BUYER_TOKEN_INVALID/,
    ],
    [
      'buyer tokens for a deployment that checks none',
      (t: string) => ['--target', t, ...buyerAuth(BUYERS.secret)],
      /--auth hs256: \S+ checks no buyer tokens \(no BUYER_AUTH\): drop --auth/,
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

/**
 * review41: deployments a user may really point --target at, where the run must refuse
 * before any load (or judge honestly) and does not. Each test fails on main as it stands.
 */
describe('bench --target: review41 reproductions', () => {
  jest.setTimeout(180_000);
  const benchDir = useBenchDir();
  const redis = useTestRedis();
  let apps: RunningApp[] = [];
  const started = async (env: Record<string, string>) => {
    const app = await startApp({ env: { REDIS_URL: redis.url(), ADMIN_TOKEN: TOKEN, KEY_PREFIX: PREFIX, ...env } });
    apps.push(app);
    return app;
  };
  afterEach(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    apps = [];
  });
  const bench = (args: string[], name: string) =>
    spawnSync(
      process.execPath,
      [
        BENCH,
        '--admin-token',
        TOKEN,
        '--redis',
        redis.url(),
        '--key-prefix',
        PREFIX,
        '--buyers',
        '200',
        '--stock',
        '20',
        '--warmup',
        '0',
        ...args,
        '--out',
        join(benchDir(), `${name}.json`),
      ],
      { cwd: ROOT, encoding: 'utf8', timeout: 120_000 },
    );

  it('refuses, before any load, a URL list whose second instance is another deployment (another KEY_PREFIX on the same Redis)', async () => {
    const ours = await started({});
    const theirs = await started({ KEY_PREFIX: 'other:' });
    const run = bench(['--target', `${ours.url},${theirs.url}`], 'mixed');
    // On main: exit 0, the row PASSes "every invariant holds" while half the buyers were answered 404 UNKNOWN_PRODUCT.
    expect({ status: run.status, stdout: run.stdout }).toEqual({ status: 2, stdout: '' });
    // Refused after its PUT: the product retired again, and said so (only the fencing counter stays).
    expect(run.stderr).toMatch(/^\[bench\] refused: --target \S+ does not sell the run's product bench-\w+ /m);
    expect(run.stderr).toMatch(/^\[bench\] left behind: only shop:\{p:bench-\w+\}:fence \(a DELETE keeps/m);
  });

  it("writes neither the deployment's admin token nor its buyer-token secret into the results (JSON and HTML)", async () => {
    const app = await started({});
    const run = bench(['--target', app.url], 'secrets');
    expect(run.status).toBe(0);
    const json = readFileSync(join(benchDir(), 'secrets.json'), 'utf8');
    const html = readFileSync(join(benchDir(), 'secrets.html'), 'utf8');
    // On main: both hold it twice, in "command" and in options.target.adminToken (and --buyer-secret, in options.target.buyerAuth).
    expect({ json: json.includes(TOKEN), html: html.includes(TOKEN) }).toEqual({ json: false, html: false });
  });

  /** Exit code 2, nothing on stdout (no load), and one line of stderr from the bench: its refusal. */
  const refusedInOneLine = (run: ReturnType<typeof bench>, said: RegExp) => {
    expect({ status: run.status, stdout: run.stdout }).toEqual({ status: 2, stdout: '' });
    expect(run.stderr.split('\n').filter((l) => /^\[bench\]|^\[ioredis\]|^\s+at /.test(l))).toEqual([
      expect.stringMatching(said),
    ]);
  };

  it('refuses an unreachable --redis, and one that wants a password, in one line, the password never shown', async () => {
    const app = await started({});
    const unreachable = bench(['--target', app.url, '--redis', 'redis://:hunter2@127.0.0.1:1'], 'no-redis');
    // On main: "[ioredis] Unhandled error event ... [bench] failed: Error: Connection is closed." and a stack, exit 1.
    refusedInOneLine(unreachable, /^\[bench\] refused: --redis redis:\/\/:<redacted>@127\.0\.0\.1:1: /);
    expect(unreachable.stderr).not.toContain('hunter2');
    const locked = await startTestRedis();
    try {
      const admin = new Redis(locked.url);
      await admin.config('SET', 'requirepass', 'hunter2');
      admin.disconnect();
      const noauth = bench(['--target', app.url, '--redis', locked.url], 'noauth');
      refusedInOneLine(noauth, /^\[bench\] refused: --redis redis:\/\/127\.0\.0\.1:\d+: .*NOAUTH/);
    } finally {
      await locked.stop();
    }
  });

  it('refuses, before any load, --database for a deployment that settles into none', async () => {
    const app = await started({});
    const run = bench(['--target', app.url, '--database', 'postgres://u:hunter2@127.0.0.1:1/x'], 'settles-none');
    // On main: the sale ran, then waited out the settle deadline and said "FAIL (settled)".
    refusedInOneLine(run, /^\[bench\] refused: --database: the deployment settles into no PostgreSQL/);
  });

  it('refuses a target that accepts connections and never answers, in one line', async () => {
    // The kernel accepts while spawnSync holds this process: a server that never answers.
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = silent.address() as AddressInfo;
      const run = bench(['--target', `http://127.0.0.1:${port}`], 'silent');
      // On main: the probe waited for ever (here, spawnSync's timeout: status null).
      refusedInOneLine(run, /^\[bench\] refused: --target http:\/\/127\.0\.0\.1:\d+ did not answer within 5 s$/);
    } finally {
      silent.close();
    }
  });

  it('does not call a rate-limited deployment (RATE_LIMIT_PER_IP) an undersell', async () => {
    const limited = await started({ RATE_LIMIT_PER_IP: '20/1s' });
    const run = bench(['--target', limited.url], 'rate-limited');
    // On main: exit 1, "verdict: fenced settle-off FAILED: undersell: demand 200 >= stock 20 but N left",
    // every other answer 429 RATE_LIMITED (a true refusal, invariant 8), before any refusal.
    expect(run.stdout).not.toMatch(/FAILED: undersell/);
    expect(run.status).toBe(2);
  });

  it('does not label a settling deployment (its /health: settlement) "settle-off" when --database is not given', async () => {
    const postgres = await startPrivatePostgres();
    try {
      const settling = await started({ DATABASE_URL: await postgres.createDatabase('deployment') });
      const run = bench(['--target', settling.url], 'settling');
      // On main: exit 0, the row "fenced settle-off | PASS", and "left behind" says nothing of its orders in PostgreSQL.
      expect(run.stdout).not.toMatch(/settle-off/);
      expect(run.stderr).toMatch(/settlement not checked \(no --database\)/);
      expect(run.stderr).toMatch(/^\[bench\] left behind: the products .*, and their orders in PostgreSQL/m);
      // A --database it does not answer on: refused before any load, its password not shown.
      const down = bench(['--target', settling.url, '--database', 'postgres://u:hunter2@127.0.0.1:1/x'], 'db-down');
      refusedInOneLine(
        down,
        /^\[bench\] refused: --database postgres:\/\/u:<redacted>@127\.0\.0\.1:1\/x: .*ECONNREFUSED/,
      );
    } finally {
      await Promise.all(apps.map((a) => a.stop()));
      apps = [];
      await postgres.remove();
    }
  });
});
