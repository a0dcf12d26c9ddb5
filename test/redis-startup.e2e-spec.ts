import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { LOCK_STRATEGY_NAMES, UNSAFE_STRATEGIES } from '../src/config/app-config';
import { KeyLayout } from '../src/redis/key-layout';
import { permissionProblem } from '../src/redis/redis-permissions';
import { ADMIN_TOKEN, request, startSale, startTestApp } from './helpers/app';
import { closeClient, startTestRedis, TestRedis } from './helpers/redis';

const ROOT = join(__dirname, '..');
const MAIN = join(ROOT, 'dist', 'src', 'main.js');
const PASSWORD = 'acl-test-password-8c2e41';

/** The least-privilege line docs/deployment.md gives, its password filled in, as words (`ACL SETUSER seckill ...`). */
function documentedAclLine(): string[] {
  const doc = readFileSync(join(ROOT, 'docs', 'deployment.md'), 'utf8');
  const line = /^ACL SETUSER .*$/m.exec(doc)?.[0];
  if (!line) throw new Error('docs/deployment.md has no ACL SETUSER line');
  return line.replace('>CHANGE_THIS_PASSWORD', `>${PASSWORD}`).split(/\s+/);
}

/** Its rules, for another user name. */
const documentedRules = (): string[] => documentedAclLine().slice(3);

/** dist/src/main.js until it exits (a refusal to start) or 20 s pass: its status and output. */
function runApp(env: Record<string, string>): { status: number | null; output: string } {
  const run = spawnSync(process.execPath, [MAIN], {
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

  beforeAll(async () => {
    if (!existsSync(MAIN)) throw new Error('dist/src/main.js is missing: run `npm test` (it builds first)');
    redis = await startTestRedis();
    admin = new Redis(redis.url);
  });

  afterAll(async () => {
    await closeClient(admin);
    await redis?.stop();
  });

  const userUrl = (user: string) => redis.url.replace('redis://', `redis://${user}:${PASSWORD}@`);

  describe("docs/deployment.md's least-privilege user", () => {
    beforeAll(async () => {
      // The line exactly as the doc gives it.
      const [acl, ...args] = documentedAclLine();
      await admin.call(acl, ...args);
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
  });

  it('refuses to serve as a user without the shard channels (acl-pubsub-default resetchannels), naming SPUBLISH', async () => {
    const line = documentedRules().filter((rule) => !rule.startsWith('&'));
    await admin.call('ACL', 'SETUSER', 'no-channels', ...line);
    const run = runApp({ REDIS_URL: userUrl('no-channels'), KEY_PREFIX: 'seckill:' });
    expect(run.status).toBe(1);
    expect(run.output).toMatch(/refusing to serve: the Redis user may not run SPUBLISH on keys and shard channels/);
  });

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
});
