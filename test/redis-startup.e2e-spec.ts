import { spawn, spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { APP_CWD } from '../harness/paths';
import { PrivatePostgres, startPrivatePostgres } from '../harness/postgres';
import { startApp } from '../harness/processes';
import { loadConfig, LOCK_STRATEGY_NAMES, UNSAFE_STRATEGIES } from '../src/config/app-config';
import { closeRedisClient, createRedisCluster, whenReady } from '../src/redis/create-client';
import { KeyLayout } from '../src/redis/key-layout';
import { permissionProblem } from '../src/redis/redis-permissions';
import { ADMIN_TOKEN, request, startSale, startTestApp } from './helpers/app';
import { usersOf } from './helpers/buckets-on-one-redis';
import { closeClient, startTestCluster, startTestRedis, TestRedis } from './helpers/redis';

const ROOT = join(__dirname, '..');
const MAIN = join(ROOT, 'dist', 'src', 'main.js');
const PASSWORD = 'acl-test-password-8c2e41';

/** An `ACL SETUSER seckill ...` line of docs/deployment.md, its password filled in, as words. */
type AclLine = string[];

/**
 * The least-privilege lines docs/deployment.md gives, in its order: every deployment's,
 * then what REDIS_WAIT_REPLICAS adds, what a cluster adds, and the one for redlock's
 * lock nodes. Read from the page, so the page and what is tested cannot drift apart.
 */
function documentedAclLines(): {
  sale: AclLine;
  settle: AclLine;
  wait: AclLine;
  cluster: AclLine;
  lockNodes: AclLine;
} {
  const doc = readFileSync(join(ROOT, 'docs', 'deployment.md'), 'utf8');
  const lines = [...doc.matchAll(/^ACL SETUSER seckill .*$/gm)].map(([line]) =>
    line.replace('>CHANGE_THIS_PASSWORD', `>${PASSWORD}`).split(/\s+/),
  );
  if (lines.length !== 5) throw new Error(`docs/deployment.md has ${lines.length} ACL SETUSER lines, not 5`);
  const [sale, settle, wait, cluster, lockNodes] = lines;
  // Each line is the one its place says it is.
  expect(sale).toEqual(expect.arrayContaining(['on', `>${PASSWORD}`, '~seckill:*', '&seckill:*', '+evalsha']));
  expect(settle).toContain('+xreadgroup');
  expect(wait.slice(3)).toEqual(['+wait']);
  expect(cluster).toContain('+cluster|slots');
  expect(lockNodes).toEqual(expect.arrayContaining(['on', `>${PASSWORD}`, '~seckill:*', '+evalsha']));
  return { sale, settle, wait, cluster, lockNodes };
}

/**
 * docs/deployment.md's command table: per line (the table's "its line below" column, in
 * the order the lines come), the commands its rows name, as ACL rules (`+xinfo|groups`).
 */
function documentedCommandTable(): string[][] {
  const doc = readFileSync(join(ROOT, 'docs', 'deployment.md'), 'utf8');
  const table = doc.slice(doc.indexOf('| feature | its line below | commands | what for |'));
  const rows = table.split('\n').slice(2);
  const byLine = new Map<string, Set<string>>();
  for (const row of rows) {
    if (!row.startsWith('|')) break;
    const cells = row.split(/(?<!\\)\|/).map((cell) => cell.trim());
    const [line, commands] = [cells[2], cells[3]];
    const named = [...commands.matchAll(/`([^`]*)`/g)]
      .flatMap(([, code]) => code.split(/\s+/))
      .filter((word) => /^[A-Z]+(\\\|[A-Z]+)?$/.test(word))
      .map((word) => `+${word.replace('\\|', '|').toLowerCase()}`);
    if (!byLine.has(line)) byLine.set(line, new Set());
    for (const command of named) byLine.get(line)!.add(command);
  }
  return [...byLine.values()].map((set) => [...set].sort());
}

/** Every deployment's rules, for another user name. */
const documentedRules = (): string[] => documentedAclLines().sale.slice(3);

/** Runs `lines` (`ACL SETUSER seckill ...`) on `admin`, then empties its ACL LOG. */
async function applyAcl(admin: Redis, ...lines: AclLine[]): Promise<void> {
  for (const [acl, ...args] of lines) await admin.call(acl, ...args);
  await admin.call('ACL', 'LOG', 'RESET');
}

/** What `admin`'s Redis refused lately (ACL LOG), as `reason object` strings: empty when nothing. */
async function refusals(admin: Redis): Promise<string[]> {
  const entries = (await admin.call('ACL', 'LOG')) as unknown[][];
  return entries.map((entry) => {
    const fields = new Map<string, unknown>();
    for (let i = 0; i + 1 < entry.length; i += 2) fields.set(String(entry[i]), entry[i + 1]);
    return `${String(fields.get('reason'))} ${String(fields.get('object'))}`;
  });
}

/** dist/src/main.js until it exits (a refusal to start) or 20 s pass: its status and output. */
function runApp(env: Record<string, string>): { status: number | null; output: string } {
  const run = spawnSync(process.execPath, [MAIN], {
    cwd: APP_CWD,
    env: { ...process.env, ADMIN_TOKEN, PORT: '0', HOST: '127.0.0.1', ...env },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: run.status, output: run.stdout + run.stderr };
}

/**
 * What the app checks of its Redis before it serves, on real redis-servers: the
 * user's permissions (ACL) and the eviction policy. Each refusal is one line naming
 * what is wrong; before these checks the app started and failed later, one buyer at a time.
 */
describe('start-up checks of the Redis: permissions and eviction policy', () => {
  let redis: TestRedis;
  let admin: Redis;
  let pg: PrivatePostgres;
  let databases = 0;

  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error('dist/src/main.js is missing: run `npm test` (it builds first)');
    [redis, pg] = await Promise.all([startTestRedis(), startPrivatePostgres()]);
    admin = new Redis(redis.url);
  }, 60_000);

  afterAll(async () => {
    await closeClient(admin);
    await Promise.all([redis?.stop(), pg?.remove()]);
  });

  /** A new database for an app that settles (DATABASE_URL). */
  const database = () => pg.createDatabase(`acl_test_${process.pid}_${++databases}`);

  /** Until the app's /health says settlement has caught up (state settling, nothing unsettled), or 20 s pass. */
  async function settledPerHealth(url: string): Promise<Record<string, unknown>> {
    for (const until = Date.now() + 20_000; ;) {
      const settlement = (await request(url, 'GET', '/health')).body.settlement as Record<string, unknown>;
      if (settlement?.state === 'settling' && settlement.unsettled === 0) return settlement;
      if (Date.now() > until) throw new Error(`not settled: ${JSON.stringify(settlement)}`);
      await sleep(200);
    }
  }

  const userUrl = (user: string) => redis.url.replace('redis://', `redis://${user}:${PASSWORD}@`);

  describe("docs/deployment.md's least-privilege user", () => {
    beforeAll(async () => {
      // Every deployment's line exactly as the doc gives it; the other lines for users
      // of their own, to ask what they grant.
      const { sale, settle, wait, cluster, lockNodes } = documentedAclLines();
      await admin.call(
        'ACL',
        'SETUSER',
        'seckill-every',
        ...sale.slice(3),
        ...settle.slice(3),
        ...wait.slice(3),
        ...cluster.slice(3),
      );
      await admin.call('ACL', 'SETUSER', 'seckill-lock', ...lockNodes.slice(3));
      await applyAcl(admin, sale);
    });

    it('the command table names exactly the commands of each line, line by line', () => {
      const lines = Object.values(documentedAclLines()).map((line) => line.filter((w) => w.startsWith('+')).sort());
      const table = documentedCommandTable();
      expect(table).toHaveLength(lines.length);
      table.forEach((named, i) =>
        expect({ line: i + 1, commands: named }).toEqual({ line: i + 1, commands: lines[i] }),
      );
    });

    it.each(['seckill', 'seckill-every', 'seckill-lock'])(
      '%s may run nothing that takes no key: FLUSHALL, FLUSHDB, SWAPDB, KEYS, SCAN, FUNCTION FLUSH, CONFIG',
      async (user) => {
        for (const command of [
          ['FLUSHALL'],
          ['FLUSHDB'],
          ['SWAPDB', '0', '1'],
          ['KEYS', '*'],
          ['SCAN', '0'],
          ['RANDOMKEY'],
          ['FUNCTION', 'FLUSH'],
          ['CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru'],
          ['MIGRATE', '127.0.0.1', '1', 'seckill:x', '0', '1'],
          ['CLUSTER', 'RESET'],
          ['CLUSTER', 'FAILOVER'],
        ]) {
          const said = String(await admin.call('ACL', 'DRYRUN', user, ...command).catch((e: Error) => e.message));
          expect({ command, said }).toEqual({ command, said: expect.stringMatching(/no permissions/) });
        }
      },
    );

    it('the built app, its start-up checks included, serves as that user and sells; Redis denies it nothing', async () => {
      await admin.call('ACL', 'LOG', 'RESET');
      const app = await startApp({ env: { REDIS_URL: userUrl('seckill'), KEY_PREFIX: 'seckill:', ADMIN_TOKEN } });
      try {
        expect((await request(app.url, 'GET', '/health/ready')).status).toBe(200);
        await startSale(app.url, 'acl-main', 5);
        const buy = () =>
          request(app.url, 'POST', '/api/orders', {
            json: { productId: 'acl-main', userId: 'ann' },
            headers: { 'idempotency-key': 'acl-main-1' },
          });
        expect((await buy()).status).toBe(201);
        expect((await buy()).headers.get('idempotent-replayed')).toBe('true');
        // The admin's catalog: SSCAN of the products set.
        const catalog = await request(app.url, 'GET', '/api/products', { admin: true });
        expect(catalog.status).toBe(200);
        expect(catalog.body.items.map((p: { id: string }) => p.id)).toContain('acl-main');
        // Its DELETE: the check and the deletion in one script, then SREM of the products set.
        const gone = await request(app.url, 'DELETE', '/api/products/acl-main?discardOrders=true', { admin: true });
        expect(gone.body).toMatchObject({ id: 'acl-main', discardedOrders: 1 });
        expect(app.tail()).not.toMatch(/could not (check|read)|refusing/);
      } finally {
        await app.stop();
      }
      expect(await refusals(admin)).toEqual([]);
    }, 30_000);

    it('DATABASE_URL without its line: refuses to serve, naming every command settlement sends that the user lacks', async () => {
      const run = runApp({
        REDIS_URL: userUrl('seckill'),
        KEY_PREFIX: 'seckill:',
        DATABASE_URL: 'postgres://seckill@127.0.0.1:1/none',
      });
      expect(run.status).toBe(1);
      expect(run.output).toMatch(
        /refusing to serve: the Redis user may not run XGROUP\|CREATE, XREADGROUP, XAUTOCLAIM, XACK, XINFO\|CONSUMERS, XGROUP\|DELCONSUMER, ZRANGE, XGROUP on keys/,
      );
      expect(run.output).not.toMatch(/NOGROUP|could not check/);
      await admin.call('ACL', 'LOG', 'RESET');
    });

    it('without DATABASE_URL where a settler marked the prefix settled (npm run settle): refuses to serve without its line, naming XGROUP (its resets make the group)', async () => {
      const marker = new KeyLayout('seckill:').settling;
      await admin.set(marker, '1');
      try {
        const run = runApp({ REDIS_URL: userUrl('seckill'), KEY_PREFIX: 'seckill:' });
        expect(run.status).toBe(1);
        expect(run.output).toMatch(/refusing to serve: the Redis user may not run XGROUP on keys/);
      } finally {
        await admin.del(marker);
        await admin.call('ACL', 'LOG', 'RESET');
      }
    });

    it('a reset that would have to make the group as a user who may not: 503 REDIS_NO_PERMISSION, nothing deleted, the limit still held', async () => {
      const keys = new KeyLayout('seckill:');
      const k = keys.product('acl-half');
      const app = await startTestApp({ REDIS_URL: userUrl('seckill'), KEY_PREFIX: 'seckill:' });
      try {
        await startSale(app.url, 'acl-half', 5);
        const buy = () => request(app.url, 'POST', '/api/orders', { json: { productId: 'acl-half', userId: 'u1' } });
        const bought = await buy();
        expect(bought.status).toBe(201);
        const paid = await request(app.url, 'POST', `/api/orders/${bought.body.orderId}/pay`, {
          json: { paymentId: 'p1' },
          admin: true,
        });
        expect(paid.status).toBe(200);
        // A settler started elsewhere after this app: the prefix marked, the log given its group, all settled.
        await admin.set(keys.settling, '1');
        await admin.xgroup('CREATE', k.orders, 'settle', '0');
        await admin.xreadgroup('GROUP', 'settle', 'elsewhere', 'STREAMS', k.orders, '>');
        await admin.xack(k.orders, 'settle', ...(await admin.xrange(k.orders, '-', '+')).map(([id]) => id));
        await admin.call('ACL', 'LOG', 'RESET');
        const reset = await request(app.url, 'PUT', '/api/products/acl-half', {
          json: { stock: 5, discardOrders: true },
          admin: true,
        });
        expect(reset.body).toMatchObject({ statusCode: 503, code: 'REDIS_NO_PERMISSION' });
        expect(reset.body.message).toMatch(/nothing was changed/);
        // Nothing deleted: the buyer's count still holds the limit.
        expect(await admin.hget(k.buyers, 'u1')).toBe('1');
        expect(await admin.xlen(k.orders)).toBe(2);
        expect((await buy()).body.code).toBe('LIMIT_REACHED');
      } finally {
        await app.close();
        await admin.del(keys.settling);
        await admin.call('ACL', 'LOG', 'RESET');
      }
    });

    it('DATABASE_URL with its line: the built app sells, takes payments, cancels, expires and settles as that user into a real PostgreSQL; Redis denies it nothing', async () => {
      const { sale, settle } = documentedAclLines();
      await applyAcl(admin, sale, settle);
      const app = await startApp({
        env: {
          REDIS_URL: userUrl('seckill'),
          KEY_PREFIX: 'seckill:',
          ADMIN_TOKEN,
          DATABASE_URL: await database(),
          EXPIRY_SWEEP_MS: '50',
        },
      });
      try {
        const put = await request(app.url, 'PUT', '/api/products/acl-settle', {
          json: { stock: 5, paymentTimeoutMs: 1_000 },
          admin: true,
        });
        expect(put.status).toBe(200);
        const ids: string[] = [];
        for (const userId of ['ann', 'bob', 'cid']) {
          const res = await request(app.url, 'POST', '/api/orders', { json: { productId: 'acl-settle', userId } });
          expect(res.status).toBe(201);
          ids.push(res.body.orderId as string);
        }
        const paid = await request(app.url, 'POST', `/api/orders/${ids[0]}/pay`, {
          json: { paymentId: 'p-ann' },
          admin: true,
        });
        expect(paid.status).toBe(200);
        expect((await request(app.url, 'POST', `/api/orders/${ids[1]}/cancel`)).status).toBe(200);
        // The third expires at its deadline (the sweeper); then the close and a restart.
        await sleep(1_300);
        expect((await request(app.url, 'GET', `/api/orders/${ids[2]}`)).body.status).toBe('expired');
        expect(await settledPerHealth(app.url)).toMatchObject({ database: 'up', state: 'settling' });
        expect((await request(app.url, 'POST', '/api/products/acl-settle/close', { admin: true })).body).toMatchObject({
          cancelled: 0,
          unsettled: 0,
        });
        const restart = await request(app.url, 'PUT', '/api/products/acl-settle', {
          json: { stock: 5, discardOrders: true },
          admin: true,
        });
        expect(restart.status).toBe(200);
        // A settled sale's DELETE asks the group (XINFO GROUPS, XRANGE) before it deletes.
        const gone = await request(app.url, 'DELETE', '/api/products/acl-settle', { admin: true });
        expect(gone.body).toMatchObject({ id: 'acl-settle', discardedOrders: 0 });
        expect(app.tail()).not.toMatch(/could not (check|read)|refusing|settlement failing|NOPERM/);
      } finally {
        await app.stop();
      }
      expect(await refusals(admin)).toEqual([]);
      await applyAcl(admin, sale);
      // Its settler marked the prefix settled: the next tests' apps, which do not settle, would make groups.
      await admin.del(new KeyLayout('seckill:').settling);
    }, 60_000);

    it('a command settlement needs, taken away while it serves: /health and /metrics say settlement is failing, and why', async () => {
      const { sale, settle } = documentedAclLines();
      await admin.call('ACL', 'SETUSER', 'losing', ...sale.slice(3), ...settle.slice(3));
      const url = userUrl('losing');
      const app = await startTestApp({ REDIS_URL: url, DATABASE_URL: await database(), KEY_PREFIX: 'seckill:' });
      try {
        await startSale(app.url, 'acl-losing', 5);
        await admin.call('ACL', 'SETUSER', 'losing', '-xreadgroup');
        expect(
          (await request(app.url, 'POST', '/api/orders', { json: { productId: 'acl-losing', userId: 'u' } })).status,
        ).toBe(201);
        for (const until = Date.now() + 10_000; ;) {
          await sleep(1_100); // /health looks at most once a second
          const settlement = (await request(app.url, 'GET', '/health')).body.settlement as Record<string, unknown>;
          if (settlement.state === 'failing') {
            expect(settlement).toMatchObject({ database: 'up', reason: expect.stringMatching(/NOPERM.*xreadgroup/i) });
            expect(settlement.unsettled).toBeGreaterThan(0);
            break;
          }
          if (Date.now() > until) throw new Error(`never said failing: ${JSON.stringify(settlement)}`);
        }
        expect(await (await fetch(`${app.url}/metrics`)).text()).toMatch(/^seckill_settlement_failing 1$/m);
      } finally {
        await app.close();
        await admin.call('ACL', 'SETUSER', 'losing', '+xreadgroup');
        // Its refusals, on purpose, are no later test's; nor its mark of a prefix settled.
        await admin.call('ACL', 'LOG', 'RESET');
        await admin.del(new KeyLayout('seckill:').settling);
      }
    }, 30_000);

    it('REDIS_WAIT_REPLICAS without its line: refuses to serve, naming WAIT', async () => {
      const run = runApp({ REDIS_URL: userUrl('seckill'), KEY_PREFIX: 'seckill:', REDIS_WAIT_REPLICAS: '1' });
      expect(run.status).toBe(1);
      expect(run.output).toMatch(/refusing to serve: the Redis user may not run WAIT on keys/);
      expect(await refusals(admin)).toEqual(['command wait']);
      await admin.call('ACL', 'LOG', 'RESET');
    });

    it('has every permission the start-up check tries', async () => {
      const client = new Redis(userUrl('seckill'));
      try {
        expect(await permissionProblem(client, new KeyLayout('seckill:'))).toBeNull();
      } finally {
        await closeClient(client);
      }
    });

    const safe = LOCK_STRATEGY_NAMES.filter((s) => !UNSAFE_STRATEGIES.includes(s) && s !== 'redlock');
    it.each(safe)('sells under %s with buyers waiting, and Redis denies it nothing', async (strategy) => {
      const app = await startTestApp({ REDIS_URL: userUrl('seckill'), LOCK_STRATEGY: strategy });
      try {
        const productId = `acl-${strategy}`;
        await startSale(app.url, productId, 20, 2);
        // Another holder has the lock for a moment: the buyers wait for its release,
        // subscribed to its shard channel (SSUBSCRIBE), as behind another instance.
        const lock = new KeyLayout('seckill:').product(productId).lock;
        if (strategy === 'reentrant') await admin.multi().hset(lock, 'another-owner', 1).pexpire(lock, 300).exec();
        else if (strategy === 'lock' || strategy === 'fenced') await admin.set(lock, 'another-holder', 'PX', 300);
        const answers = await Promise.all(
          Array.from({ length: 30 }, (_, i) =>
            request(app.url, 'POST', '/api/orders', {
              json: { productId, userId: `u${i % 12}` },
              headers: { 'idempotency-key': `k${i}` },
            }),
          ),
        );
        expect(answers.filter((a) => a.status === 201)).toHaveLength(20);
        expect(answers.every((a) => a.status === 201 || a.status === 409)).toBe(true);
        expect((await request(app.url, 'GET', '/health')).status).toBe(200);
        expect((await request(app.url, 'GET', `/api/products/${productId}`)).body).toMatchObject({ stock: 0 });
      } finally {
        await app.close();
      }
      expect(await admin.call('ACL', 'LOG')).toEqual([]);
    });

    it("limits the door as that user: rate-limiter-flexible's script, its EXPIRE included, is denied nothing", async () => {
      const app = await startTestApp({ REDIS_URL: userUrl('seckill'), RATE_LIMIT_PER_IP: '2/60s' });
      try {
        await startSale(app.url, 'acl-door', 10, 5);
        // A count left without a TTL: the script gives it one with EXPIRE.
        const counted = 'seckill:rate:ip:127.0.0.1';
        await admin.set(counted, '0');
        const buy = (userId: string) =>
          request(app.url, 'POST', '/api/orders', { json: { productId: 'acl-door', userId } });
        expect([(await buy('u1')).status, (await buy('u2')).status, (await buy('u3')).status]).toEqual([201, 201, 429]);
        expect(await admin.pttl(counted)).toBeGreaterThan(0);
      } finally {
        await app.close();
        await admin.del('seckill:rate:ip:127.0.0.1');
      }
      expect(await admin.call('ACL', 'LOG')).toEqual([]);
    });
  });

  it('refuses to serve as a user without the shard channels (acl-pubsub-default resetchannels), naming SPUBLISH', async () => {
    const line = documentedRules().filter((rule) => !rule.startsWith('&'));
    await admin.call('ACL', 'SETUSER', 'no-channels', ...line);
    const run = runApp({ REDIS_URL: userUrl('no-channels'), KEY_PREFIX: 'seckill:' });
    expect(run.status).toBe(1);
    expect(run.output).toMatch(
      /refusing to serve: the Redis user may not run SPUBLISH, SSUBSCRIBE on keys and shard channels/,
    );
  });

  it.each([
    ['-watch', 'optimistic', 'WATCH'],
    ['-ssubscribe', 'fenced', 'SSUBSCRIBE'],
    ['-hgetall', 'fenced', 'HGETALL'],
    ['-xadd', 'lock', 'XADD'],
  ])(
    'refuses to serve as a user with %s (LOCK_STRATEGY=%s), naming %s',
    async (rule, strategy, named) => {
      const user = `without${rule}`.replace(/[^a-z]/g, '-');
      await admin.call('ACL', 'SETUSER', user, ...documentedRules(), rule);
      const run = runApp({ REDIS_URL: userUrl(user), KEY_PREFIX: 'seckill:', LOCK_STRATEGY: strategy });
      expect(run.status).toBe(1);
      expect(run.output).toMatch(new RegExp(`refusing to serve: the Redis user may not run ${named} on keys`));
    },
    30_000,
  );

  it('answers 503 REDIS_NO_PERMISSION, nothing written, when a permission is taken away while it serves', async () => {
    await admin.call('ACL', 'SETUSER', 'shrinking', ...documentedRules());
    const app = await startTestApp({ REDIS_URL: userUrl('shrinking') });
    try {
      await startSale(app.url, 'perm', 5);
      await admin.call('ACL', 'SETUSER', 'shrinking', '-hmget');
      const res = await request(app.url, 'POST', '/api/orders', { json: { productId: 'perm', userId: 'ann' } });
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ code: 'REDIS_NO_PERMISSION' });
      expect(res.headers.get('retry-after')).toBe('1');
      expect(await admin.get('seckill:{p:perm}:stock')).toBe('5');
    } finally {
      await admin.call('ACL', 'SETUSER', 'shrinking', '+hmget');
      await app.close();
    }
  });

  it('a command a script needs, taken away while it serves: 503 REDIS_NO_PERMISSION that says the script may have written part', async () => {
    await admin.call('ACL', 'SETUSER', 'midway', ...documentedRules(), '~midway:*', '&midway:*');
    const app = await startTestApp({ REDIS_URL: userUrl('midway'), KEY_PREFIX: 'midway:' });
    try {
      await startSale(app.url, 'perm', 5);
      // fenced-write-8.lua's XADD comes after its DECRBY: Redis does not roll the script back.
      await admin.call('ACL', 'SETUSER', 'midway', '-xadd');
      const res = await request(app.url, 'POST', '/api/orders', { json: { productId: 'perm', userId: 'ann' } });
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({ code: 'REDIS_NO_PERMISSION' });
      expect(res.body.message).toContain('writes before that command may have been applied');
      // Which is what happened: the unit is gone, and no order says where.
      expect(await admin.get('midway:{p:perm}:stock')).toBe('4');
      expect(await admin.xlen('midway:{p:perm}:orders')).toBe(0);
    } finally {
      await app.close();
    }
  });

  it.each(['allkeys-lru', 'volatile-lru'])(
    'refuses to serve on maxmemory-policy %s, naming the setting; REDIS_ALLOW_EVICTION=1 lets it',
    async (policy) => {
      await admin.config('SET', 'maxmemory-policy', policy);
      try {
        const refused = runApp({ REDIS_URL: redis.url });
        expect(refused.status).toBe(1);
        expect(refused.output).toContain(
          `refusing to serve: Redis 127.0.0.1:${redis.port} has maxmemory-policy ${policy}`,
        );
        expect(refused.output).toContain('set maxmemory-policy noeviction');
        // Allowed, it starts listening (and is stopped with SIGTERM).
        const allowed = spawn(process.execPath, [MAIN], {
          cwd: APP_CWD,
          env: {
            ...process.env,
            ADMIN_TOKEN,
            PORT: '0',
            HOST: '127.0.0.1',
            REDIS_URL: redis.url,
            REDIS_ALLOW_EVICTION: '1',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        const exited = new Promise<number | null>((resolve) => allowed.once('exit', resolve));
        let output = '';
        await new Promise<void>((resolve, reject) => {
          allowed.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
            output += chunk;
            if (output.includes('seckill listening on')) resolve();
          });
          void exited.then((code) => reject(new Error(`exited ${code} before listening:\n${output}`)));
        });
        allowed.kill('SIGTERM');
        expect(await exited).toBe(0);
      } finally {
        await admin.config('SET', 'maxmemory-policy', 'noeviction');
      }
    },
    30_000,
  );

  it('REDIS_WAIT_REPLICAS and DATABASE_URL with their lines, on a master with a replica: the built app sells and settles as that user, Redis denying it nothing', async () => {
    const master = await startTestRedis();
    const replica = await startTestRedis();
    const onMaster = new Redis(master.url);
    const onReplica = new Redis(replica.url);
    try {
      await onReplica.replicaof('127.0.0.1', master.port);
      while (!/master_link_status:up/.test(await onReplica.info('replication'))) await sleep(20);
      const { sale, settle, wait } = documentedAclLines();
      await applyAcl(onMaster, sale, settle, wait);
      const url = master.url.replace('redis://', `redis://seckill:${PASSWORD}@`);
      const app = await startApp({
        env: {
          REDIS_URL: url,
          KEY_PREFIX: 'seckill:',
          ADMIN_TOKEN,
          REDIS_WAIT_REPLICAS: '1',
          DATABASE_URL: await database(),
        },
      });
      try {
        await startSale(app.url, 'acl-wait', 5);
        const buy = (userId: string) =>
          request(app.url, 'POST', '/api/orders', {
            json: { productId: 'acl-wait', userId },
            headers: { 'idempotency-key': `acl-wait-${userId}` },
          });
        for (const userId of ['ann', 'bob']) expect((await buy(userId)).status).toBe(201);
        expect((await buy('ann')).headers.get('idempotent-replayed')).toBe('true');
        await settledPerHealth(app.url);
        expect(app.tail()).not.toMatch(/could not (check|read)|refusing|settlement failing/);
      } finally {
        await app.stop();
      }
      expect(await refusals(onMaster)).toEqual([]);
    } finally {
      await closeClient(onReplica);
      await closeClient(onMaster);
      await replica.stop();
      await master.stop();
    }
  }, 60_000);

  it("the lines on every node of a Redis Cluster with replicas: the built app's start-up checks pass, it sells and settles, Redis denies it nothing", async () => {
    const cluster = await startTestCluster({ masters: 3, replicas: 1 });
    const admins = cluster.nodes.map((node) => new Redis(node.url));
    try {
      const { sale, settle, wait, cluster: clusterLine } = documentedAclLines();
      for (const a of admins) await applyAcl(a, sale, settle, wait, clusterLine);
      const nodes = cluster.clusterNodes
        .split(',')
        .map((node) => `redis://seckill:${PASSWORD}@${node}`)
        .join(',');
      const probe = createRedisCluster(loadConfig({ REDIS_CLUSTER_NODES: nodes, ADMIN_TOKEN }).redisCluster!, 'probe');
      try {
        expect(await whenReady(probe, 10_000)).toBe(true);
        expect(await permissionProblem(probe, new KeyLayout('seckill:'), { waitReplicas: 1, settle: true })).toBeNull();
      } finally {
        await closeRedisClient(probe);
      }
      // The process as `npm start` runs it: the start-up checks ask every node, replicas
      // included (CLUSTER NODES finds them; ioredis sends READONLY to each).
      const app = await startApp({
        env: {
          REDIS_CLUSTER_NODES: nodes,
          KEY_PREFIX: 'seckill:',
          ADMIN_TOKEN,
          REDIS_WAIT_REPLICAS: '1',
          DATABASE_URL: await database(),
        },
      });
      try {
        await startSale(app.url, 'acl-cluster', 10, 1);
        const answers = await Promise.all(
          Array.from({ length: 15 }, (_, i) =>
            request(app.url, 'POST', '/api/orders', {
              json: { productId: 'acl-cluster', userId: `u${i}` },
              headers: { 'idempotency-key': `k${i}` },
            }),
          ),
        );
        expect(answers.filter((a) => a.status === 201)).toHaveLength(10);
        // A product in escrow buckets, one on each master, sold to buyers of bucket 0 only:
        // moves from buckets 1 and 2 (each step waiting for a replica), a SOLD_OUT its
        // refill confirmed, a cancel back to the bucket that sold it, bought again; and a
        // second product's waiting room, which counts every bucket.
        const put = (id: string, json: Record<string, unknown>) =>
          request(app.url, 'PUT', `/api/products/${id}`, { json, admin: true });
        expect((await put('acl-buckets', { stock: 6, perUserLimit: 1, buckets: 3 })).status).toBe(200);
        const homed = usersOf(0, 3, 8, 'acl');
        const sold = [];
        const ids: string[] = [];
        for (const u of homed.slice(0, 7)) {
          const answer = await request(app.url, 'POST', '/api/orders', {
            json: { productId: 'acl-buckets', userId: u },
          });
          sold.push(answer.body.code ?? answer.status);
          if (answer.status === 201) ids.push(answer.body.orderId);
        }
        expect(sold).toEqual([201, 201, 201, 201, 201, 201, 'SOLD_OUT']);
        const mine = await request(app.url, 'POST', '/api/orders', {
          json: { productId: 'acl-buckets', userId: homed[0] },
        });
        expect(mine.body.code).toBe('LIMIT_REACHED');
        const last = (await request(app.url, 'GET', '/api/products/acl-buckets/buckets', { admin: true })).body;
        expect(last.map((b: { stock: number }) => b.stock)).toEqual([0, 0, 0]);
        expect((await request(app.url, 'POST', `/api/orders/${ids[5]}/cancel`)).status).toBe(200);
        const again = await request(app.url, 'POST', '/api/orders', {
          json: { productId: 'acl-buckets', userId: homed[7] },
        });
        expect(again.status).toBe(201);
        expect((await put('acl-room', { stock: 2, buckets: 3, queue: { admitPerSecond: 100 } })).status).toBe(200);
        const joined = await request(app.url, 'POST', '/api/products/acl-room/queue', { json: { userId: 'r1' } });
        expect(joined.body.state).toBe('admitted');
        expect(
          (
            await request(app.url, 'POST', '/api/products/acl-room/orders', {
              json: { userId: 'r1' },
              headers: { 'admission-pass': joined.body.pass },
            })
          ).status,
        ).toBe(201);
        expect((await request(app.url, 'GET', '/health')).status).toBe(200);
        expect((await request(app.url, 'GET', '/health/ready')).status).toBe(200);
        await settledPerHealth(app.url);
        expect(app.tail()).not.toMatch(/could not (check|read)|refusing|settlement failing/);
      } finally {
        await app.stop();
      }
      for (const [i, a] of admins.entries()) {
        expect({ node: cluster.nodes[i].port, refused: await refusals(a) }).toEqual({
          node: cluster.nodes[i].port,
          refused: [],
        });
      }
      // A wrong password on the seeds: refused at once, naming the variable and its user.
      const wrong = runApp({ REDIS_CLUSTER_NODES: nodes.replaceAll(`:${PASSWORD}@`, ':not-the-password@') });
      expect(wrong.status).toBe(1);
      expect(wrong.output.trim().split('\n')).toEqual([
        expect.stringMatching(
          /^seckill: refusing to start: Redis at 127\.0\.0\.1:\d+ refused the login of REDIS_CLUSTER_NODES's user "seckill": .* \(WRONGPASS\)$/,
        ),
      ]);
      // ioredis follows an ASK (a slot being moved) with ASKING: granted, though no test moves a slot as this user.
      expect(await admins[0].call('ACL', 'DRYRUN', 'seckill', 'ASKING')).toBe('OK');
    } finally {
      await Promise.all(admins.map(closeClient));
      await cluster.stop();
    }
  }, 90_000);

  it("redlock's lock nodes with their line: the app sells as those users, Redis denying it nothing", async () => {
    const nodes = await Promise.all([0, 1, 2].map(() => startTestRedis()));
    const nodeAdmins = nodes.map((n) => new Redis(n.url));
    try {
      const { sale, lockNodes } = documentedAclLines();
      await applyAcl(admin, sale);
      for (const a of nodeAdmins) await applyAcl(a, lockNodes);
      const app = await startTestApp({
        REDIS_URL: userUrl('seckill'),
        LOCK_STRATEGY: 'redlock',
        REDLOCK_URLS: nodes.map((n) => n.url.replace('redis://', `redis://seckill:${PASSWORD}@`)).join(','),
      });
      try {
        await startSale(app.url, 'acl-redlock', 5, 1);
        const answers = await Promise.all(
          Array.from({ length: 8 }, (_, i) =>
            request(app.url, 'POST', '/api/orders', { json: { productId: 'acl-redlock', userId: `u${i}` } }),
          ),
        );
        expect(answers.filter((a) => a.status === 201)).toHaveLength(5);
        expect((await request(app.url, 'GET', '/health')).body).toMatchObject({ lockNodes: { up: 3 } });
      } finally {
        await app.close();
      }
      for (const a of [admin, ...nodeAdmins]) expect(await refusals(a)).toEqual([]);
    } finally {
      await Promise.all(nodeAdmins.map(closeClient));
      await Promise.all(nodes.map((n) => n.stop()));
    }
  }, 60_000);
});

/**
 * A login Redis refuses (a wrong password, none where one is required, one where none is
 * set) is not an outage: it never heals. Before, the app retried it for
 * REDIS_READY_WAIT_MS, then listened anyway and answered every buyer 503, with
 * ioredis's own "Stream isn't writeable ..." in its log.
 */
describe('a login Redis refuses: the app refuses to start, in one line naming the variable and its user', () => {
  const SECRET = 'requirepass-secret-5d1f9a';
  let protectedRedis: TestRedis;
  let openRedis: TestRedis;

  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error('dist/src/main.js is missing: run `npm test` (it builds first)');
    [protectedRedis, openRedis] = await Promise.all([startTestRedis(), startTestRedis()]);
    const admin = new Redis(protectedRedis.url);
    try {
      await admin.call('ACL', 'SETUSER', 'app', 'on', '>app-password-2b7e', '~*', '&*', '+@all');
      await admin.config('SET', 'requirepass', SECRET);
    } finally {
      admin.disconnect();
    }
  });

  afterAll(async () => {
    await Promise.all([protectedRedis?.stop(), openRedis?.stop()]);
  });

  const at = (redis: TestRedis, login: string) => redis.url.replace('redis://', `redis://${login}@`);

  it.each([
    [
      'a wrong password',
      () => at(protectedRedis, ':wrong-password'),
      'refused the login of REDIS_URL\'s user "default"',
      'WRONGPASS',
    ],
    [
      "a user's wrong password",
      () => at(protectedRedis, 'app:wrong-password'),
      'refused the login of REDIS_URL\'s user "app"',
      'WRONGPASS',
    ],
    [
      'no password where one is required',
      () => protectedRedis.url,
      'requires a password and REDIS_URL gives none for user "default"',
      'NOAUTH',
    ],
  ])('%s', (_, url, said, reply) => {
    const run = runApp({ REDIS_URL: url() });
    expect(run.status).toBe(1);
    const port = new URL(url()).port;
    expect(run.output.trim().split('\n')).toEqual([
      expect.stringContaining(`seckill: refusing to start: Redis at 127.0.0.1:${port} ${said}`),
    ]);
    expect(run.output).toContain(`(${reply})`);
    expect(run.output).not.toContain('wrong-password');
  });

  it('a password where the Redis has none: it may not be the Redis meant', () => {
    const run = runApp({ REDIS_URL: at(openRedis, ':some-password-8f2c') });
    expect(run.status).toBe(1);
    // One line of ours: not ioredis's "[WARN] This Redis server's `default` user does not require a password".
    expect(run.output.trim().split('\n')).toEqual([
      `seckill: refusing to start: REDIS_URL gives a password for user "default", but Redis at 127.0.0.1:${openRedis.port} has none set: it may not be the Redis you meant; remove the password from REDIS_URL, or set one on that Redis (requirepass)`,
    ]);
  });

  it("a lock node's wrong password (REDLOCK_URLS) is named too", () => {
    const run = runApp({
      REDIS_URL: at(protectedRedis, `:${SECRET}`),
      LOCK_STRATEGY: 'redlock',
      REDLOCK_URLS: [at(protectedRedis, 'app:wrong-password'), openRedis.url].join(','),
    });
    expect(run.status).toBe(1);
    expect(run.output.trim().split('\n')).toEqual([
      expect.stringContaining(`refused the login of REDLOCK_URLS's user "app"`),
    ]);
  });

  it('the right password: it starts, and sells', async () => {
    const app = await startApp({ env: { REDIS_URL: at(protectedRedis, `:${SECRET}`), ADMIN_TOKEN } });
    try {
      await startSale(app.url, 'login', 1);
      expect(
        (await request(app.url, 'POST', '/api/orders', { json: { productId: 'login', userId: 'ann' } })).status,
      ).toBe(201);
      expect(app.tail()).not.toMatch(/refusing|unavailable/);
    } finally {
      await app.stop();
    }
  });
});
