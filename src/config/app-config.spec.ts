import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CONFIG_DEFAULTS, ConfigError, loadConfig, loadServerConfig, LOCK_STRATEGY_NAMES } from './app-config';

const REQUIRED = { REDIS_URL: 'redis://127.0.0.1:6380', ADMIN_TOKEN: 'a-long-enough-admin-token' };

describe('loadConfig', () => {
  it('applies the frozen defaults', () => {
    const config = loadConfig(REQUIRED);
    expect(config).toEqual({
      port: 3000,
      host: '0.0.0.0',
      redisUrl: REQUIRED.REDIS_URL,
      redisCluster: null,
      redisWaitReplicas: 0,
      redisWaitTimeoutMs: 500,
      redisAllowEviction: false,
      redlockUrls: [],
      lockStrategy: 'fenced',
      lockTtlMs: 10_000,
      lockWaitMs: 5_000,
      requestTimeoutMs: 10_000,
      trustProxy: false,
      shutdownTimeoutMs: 8_000,
      adminToken: REQUIRED.ADMIN_TOKEN,
      keyPrefix: 'seckill:',
      allowUnsafe: false,
      logLevel: 'log',
      telemetry: true,
      faultStopAt: null,
      faultClockSkewMs: 0,
      saleClock: 'redis',
      databaseUrl: null,
      paymentTimeoutMs: 900_000,
      pgStatementTimeoutMs: 5_000,
      settleBatch: 1_000,
      settleClaimIdleMs: 10_000,
      expirySweepMs: 500,
      settleTrim: false,
      rateLimitPerIp: null,
      rateLimitPerUser: null,
      buyerAuth: null,
      paymentWebhookSecret: null,
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(CONFIG_DEFAULTS)).toBe(true);
    // The defaults are the declarations' own: what an unset variable reads as.
    expect(config).toMatchObject(CONFIG_DEFAULTS);
    expect(Object.keys(CONFIG_DEFAULTS)).toEqual(
      expect.arrayContaining(['host', 'keyPrefix', 'logLevel', 'lockTtlMs']),
    );
  });

  it('reads every variable', () => {
    const config = loadConfig({
      ...REQUIRED,
      PORT: '8080',
      HOST: '127.0.0.1',
      LOCK_STRATEGY: 'none',
      LOCK_TTL_MS: '2000',
      LOCK_WAIT_MS: '0',
      REQUEST_TIMEOUT_MS: '1000',
      SHUTDOWN_TIMEOUT_MS: '100',
      KEY_PREFIX: 'shop:',
      ALLOW_UNSAFE: '1',
      LOG_LEVEL: 'debug',
      TELEMETRY: '0',
      REDIS_WAIT_REPLICAS: '1',
      REDIS_WAIT_TIMEOUT_MS: '250',
      REDIS_ALLOW_EVICTION: '1',
      TRUST_PROXY: 'loopback, 10.0.0.0/8',
    });
    expect(config).toMatchObject({
      redisAllowEviction: true,
      trustProxy: ['loopback', '10.0.0.0/8'],
      redisWaitReplicas: 1,
      redisWaitTimeoutMs: 250,
      port: 8080,
      host: '127.0.0.1',
      lockStrategy: 'none',
      lockTtlMs: 2000,
      lockWaitMs: 0,
      requestTimeoutMs: 1000,
      shutdownTimeoutMs: 100,
      keyPrefix: 'shop:',
      allowUnsafe: true,
      logLevel: 'debug',
      telemetry: false,
    });
  });

  it.each([
    ['true', true],
    ['1', 1],
    ['2', 2],
    ['false', false],
    ['uniquelocal', ['uniquelocal']],
  ])('TRUST_PROXY=%s is %j', (value, expected) => {
    expect(loadConfig({ ...REQUIRED, TRUST_PROXY: value }).trustProxy).toEqual(expected);
  });

  it.each([
    [{ REDIS_URL: undefined }, 'REDIS_URL is required'],
    [{ REDIS_URL: 'localhost:6379' }, 'REDIS_URL must start with redis://'],
    [{ REDIS_URL: 'http://x' }, 'REDIS_URL must start with redis://'],
    [{ ADMIN_TOKEN: undefined }, 'ADMIN_TOKEN is required'],
    [{ ADMIN_TOKEN: 'short' }, 'ADMIN_TOKEN is required and must be at least 16 characters'],
    // The README's and .env.example's example value once: long enough, and public.
    [{ ADMIN_TOKEN: 'change-me-to-a-long-secret' }, 'ADMIN_TOKEN looks like an example value (it contains "changeme")'],
    [
      { ADMIN_TOKEN: 'Your_Secret_Token_Here_2024' },
      'ADMIN_TOKEN looks like an example value (it contains "yoursecret")',
    ],
    [{ ADMIN_TOKEN: 'x'.repeat(40) }, 'ADMIN_TOKEN is too easy to guess'],
    [{ ADMIN_TOKEN: 'ab'.repeat(20) }, 'ADMIN_TOKEN is too easy to guess'],
    // Sixteen distinct characters, each once, and still a guess away (the review's list).
    [{ ADMIN_TOKEN: 'abcdefghijklmnop' }, 'ADMIN_TOKEN is too easy to guess'],
    [{ ADMIN_TOKEN: '0123456789abcdefg' }, 'ADMIN_TOKEN is too easy to guess'],
    [{ ADMIN_TOKEN: 'qwertyuiopasdfghjkl' }, 'ADMIN_TOKEN is too easy to guess'],
    [{ ADMIN_TOKEN: 'correcthorsebatterystaple' }, 'ADMIN_TOKEN is too easy to guess'],
    [{ ADMIN_TOKEN: 'admin_token_12345' }, 'ADMIN_TOKEN is too easy to guess'],
    [{ ADMIN_TOKEN: 'seckill-admin-token' }, 'ADMIN_TOKEN is too easy to guess'],
    [{ ADMIN_TOKEN: 'P4ssw0rd-P4ssw0rd-2024' }, 'ADMIN_TOKEN is too easy to guess'],
    [{ PORT: 'abc' }, 'PORT must be an integer from 0 to 65535, got "abc"'],
    [{ PORT: '70000' }, 'PORT must be an integer'],
    [{ PORT: '-1' }, 'PORT must be an integer'],
    [{ LOCK_TTL_MS: '10.5' }, 'LOCK_TTL_MS must be an integer'],
    [{ LOCK_TTL_MS: '50' }, 'LOCK_TTL_MS must be an integer from 100'],
    [{ LOCK_WAIT_MS: '1e3' }, 'LOCK_WAIT_MS must be an integer'],
    [{ REQUEST_TIMEOUT_MS: '0' }, 'REQUEST_TIMEOUT_MS must be an integer from 1000 to 600000, got "0"'],
    [{ SHUTDOWN_TIMEOUT_MS: '0' }, 'SHUTDOWN_TIMEOUT_MS must be an integer from 100 to 600000, got "0"'],
    [{ SHUTDOWN_TIMEOUT_MS: '700000' }, 'SHUTDOWN_TIMEOUT_MS must be an integer from 100'],
    [{ LOCK_STRATEGY: 'redlock-please' }, `LOCK_STRATEGY must be one of ${LOCK_STRATEGY_NAMES.join(', ')}`],
    [
      { LOCK_STRATEGY: 'none' },
      'LOCK_STRATEGY "none" can oversell and runs only as a demonstration: set ALLOW_UNSAFE=1',
    ],
    [{ LOCK_STRATEGY: 'none', ALLOW_UNSAFE: 'yes' }, 'ALLOW_UNSAFE must be 1, 0, true or false'],
    [{ KEY_PREFIX: '' }, 'KEY_PREFIX must be 1-64 characters'],
    [{ KEY_PREFIX: 'a{b}' }, 'KEY_PREFIX must be 1-64 characters'],
    [
      { LOG_LEVEL: 'loud' },
      'LOG_LEVEL must be one of error, warn, log, debug, verbose, or pino\'s trace, debug, info, warn, error, fatal, silent; got "loud"',
    ],
    [{ HOST: 'a b' }, 'HOST must be an address'],
    [{ LOCK_STRATEGY: 'redlock' }, 'REDLOCK_URLS is required with LOCK_STRATEGY=redlock'],
    [{ LOCK_STRATEGY: 'redlock', REDLOCK_URLS: 'redis://a:1,http://b' }, 'REDLOCK_URLS must start with redis://'],
    [{ LOCK_STRATEGY: 'redlock', REDLOCK_URLS: 'redis://a:1,,redis://b:1' }, 'REDLOCK_URLS has an empty entry'],
    [{ LOCK_STRATEGY: 'redlock', REDLOCK_URLS: 'redis://a:1,redis://a:1' }, 'REDLOCK_URLS lists the same node twice'],
    [
      { FAULT_STOP_AT: 'before-write:2' },
      'FAULT_STOP_AT makes the app stop itself and is for the fault suite only: set ALLOW_UNSAFE=1',
    ],
    [
      { FAULT_STOP_AT: 'after-lunch:2', ALLOW_UNSAFE: '1' },
      'FAULT_STOP_AT must be <point>:<n> with a point of before-write',
    ],
    [
      { FAULT_STOP_AT: 'before-write:1', ALLOW_UNSAFE: '1', NODE_ENV: 'production' },
      'FAULT_STOP_AT makes the app stop itself and is never accepted with NODE_ENV=production',
    ],
    [
      { FAULT_STOP_AT: 'before-write:1', NODE_ENV: 'Production' },
      'FAULT_STOP_AT makes the app stop itself and is never accepted with NODE_ENV=production',
    ],
    [{ FAULT_STOP_AT: 'before-write:0', ALLOW_UNSAFE: '1' }, 'FAULT_STOP_AT must be <point>:<n>'],
    [{ FAULT_STOP_AT: 'before-write', ALLOW_UNSAFE: '1' }, 'FAULT_STOP_AT must be <point>:<n>'],
    [{ REDIS_CLUSTER_NODES: 'a:1,b:2' }, 'REDIS_CLUSTER_NODES and REDIS_URL are both set'],
    [{ REDIS_URL: undefined, REDIS_CLUSTER_NODES: 'a:1,,b:2' }, 'REDIS_CLUSTER_NODES has an empty entry'],
    [{ REDIS_URL: undefined, REDIS_CLUSTER_NODES: 'a:1,a:1' }, 'REDIS_CLUSTER_NODES lists the same node twice'],
    [{ REDIS_URL: undefined, REDIS_CLUSTER_NODES: 'a' }, 'REDIS_CLUSTER_NODES entry "a" needs a port'],
    [{ REDIS_URL: undefined, REDIS_CLUSTER_NODES: 'http://a:1' }, 'REDIS_CLUSTER_NODES must start with redis://'],
    [
      { REDIS_URL: undefined, REDIS_CLUSTER_NODES: 'redis://a:1/2' },
      'REDIS_CLUSTER_NODES entry "redis://a:1/2" names a database',
    ],
    [
      { REDIS_URL: undefined, REDIS_CLUSTER_NODES: 'redis://:x@a:1,rediss://:x@b:1' },
      'REDIS_CLUSTER_NODES entries disagree on the scheme, user or password',
    ],
    [
      { REDIS_URL: undefined, REDIS_CLUSTER_NODES: 'redis://:pw%@h:7000' },
      'REDIS_CLUSTER_NODES entry "redis://:pw%@h:7000" has a malformed %-escape in its user or password',
    ],
    [
      { REDIS_URL: undefined, REDIS_CLUSTER_NODES: '::1:7000' },
      'REDIS_CLUSTER_NODES entry "::1:7000": write an IPv6 address in brackets, [::1]:7000',
    ],
    [
      { REDIS_URL: undefined, REDIS_CLUSTER_NODES: 'a:0' },
      'REDIS_CLUSTER_NODES entry "a:0" has port 0: a port is 1-65535',
    ],
    [
      { REDIS_URL: undefined, REDIS_CLUSTER_NODES: 'redis://a:7000?password=x' },
      'REDIS_CLUSTER_NODES entry "redis://a:7000?password=x" has a query string',
    ],
    [{ REDIS_URL: undefined, REDIS_CLUSTER_NODES: 'H:7000,h:7000' }, 'REDIS_CLUSTER_NODES lists the same node twice'],
    [{ REDIS_WAIT_REPLICAS: '-1' }, 'REDIS_WAIT_REPLICAS must be an integer from 0 to 16'],
    [{ TRUST_PROXY: 'nginx' }, 'TRUST_PROXY must be true, false, a hop count, or a comma-separated list'],
    // Address-like, but no address or range the proxy check could hold (it ended in a stack trace at start-up).
    [{ TRUST_PROXY: '10.0.0.0/99' }, 'TRUST_PROXY must be true, false, a hop count, or a comma-separated list'],
    [{ TRUST_PROXY: '300.1.1.1' }, 'TRUST_PROXY must be true, false, a hop count, or a comma-separated list'],
    [{ TRUST_PROXY: 'loopback,1.2.3' }, 'TRUST_PROXY must be true, false, a hop count, or a comma-separated list'],
    [{ REDIS_WAIT_TIMEOUT_MS: '0' }, 'REDIS_WAIT_TIMEOUT_MS must be an integer from 1 to 60000'],
  ])('refuses %j with one line naming the variable', (overrides, message) => {
    const env = { ...REQUIRED, ...overrides };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    try {
      loadConfig(env);
    } catch (err) {
      expect((err as ConfigError).message).toContain(message);
      expect((err as ConfigError).message).not.toContain('\n');
      expect((err as ConfigError).variable).toBe(message.split(' ')[0]);
    }
  });

  it('names every invalid variable at once, one line each, in one error', () => {
    const env = {
      ...REQUIRED,
      PORT: 'abc',
      LOCK_TTL_MS: 'ten seconds',
      LOG_LEVEL: 'loud',
      RATE_LIMIT_PER_IP: '20/1h',
      ADMIN_TOKEN: 'short',
    };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    try {
      loadConfig(env);
    } catch (err) {
      const lines = (err as ConfigError).lines;
      // In the order the sections are declared (src/config/app-config.ts CONFIG_SECTIONS).
      expect(lines.map((line) => line.split(' ')[0])).toEqual([
        'PORT',
        'LOCK_TTL_MS',
        'ADMIN_TOKEN',
        'RATE_LIMIT_PER_IP',
        'LOG_LEVEL',
      ]);
      expect((err as ConfigError).message).toBe(lines.join('\n'));
      expect((err as ConfigError).variable).toBe('PORT');
    }
  });

  it('names a bad variable of every section and kind at once, each with the line it has alone', () => {
    // In declaration order: server, redis, strategy, locks, door, telemetry, orders, settlement, lessons.
    const bad = {
      PORT: '-1',
      HOST: 'a b',
      TRUST_PROXY: 'nginx',
      REDIS_WAIT_REPLICAS: '99',
      KEY_PREFIX: '',
      LOCK_STRATEGY: 'nope',
      LOCK_WAIT_MS: 'x',
      RATE_LIMIT_PER_USER: '0/1s',
      PAYMENT_WEBHOOK_SECRET: 'short',
      TELEMETRY: 'maybe',
      EXPIRY_SWEEP_MS: '1',
      DATABASE_URL: 'mysql://x',
      SETTLE_TRIM: 'yes',
      SALE_CLOCK: 'wall',
      FAULT_CLOCK_SKEW_MS: '5s',
    };
    const linesOf = (env: Record<string, string>): readonly string[] => {
      try {
        loadConfig({ ...REQUIRED, ...env });
      } catch (err) {
        return (err as ConfigError).lines;
      }
      throw new Error(`${JSON.stringify(env)} was taken`);
    };
    const alone = Object.entries(bad).map(([name, value]) => linesOf({ [name]: value }));
    for (const lines of alone) expect(lines).toHaveLength(1);
    expect(linesOf(bad)).toEqual(alone.flat());
  });

  it('judges a rule between variables only when the variables it reads are valid, and names it with the rest', () => {
    // ALLOW_UNSAFE is invalid: "set ALLOW_UNSAFE=1" would say nothing new.
    expect(() => loadConfig({ ...REQUIRED, LOCK_STRATEGY: 'none', ALLOW_UNSAFE: 'yes' })).toThrow(
      /^ALLOW_UNSAFE must be 1, 0, true or false, got "yes"$/,
    );
    expect(() => loadConfig({ ...REQUIRED, LOCK_STRATEGY: 'redlock', PORT: '-1' })).toThrow(
      /^PORT must be an integer[^\n]*\nREDLOCK_URLS is required with LOCK_STRATEGY=redlock/,
    );
  });

  it("takes pino's level names for LOG_LEVEL, as the Nest level that writes the same lines", () => {
    const level = (LOG_LEVEL: string) => loadConfig({ ...REQUIRED, LOG_LEVEL }).logLevel;
    expect(['info', 'INFO', 'trace', 'debug', 'warn', 'error'].map(level)).toEqual([
      'log',
      'log',
      'verbose',
      'debug',
      'warn',
      'error',
    ]);
    // The app logs nothing at fatal and always writes its errors.
    expect([level('fatal'), level('silent'), level('verbose')]).toEqual(['error', 'error', 'verbose']);
  });

  describe('HOST, for the process that listens (loadServerConfig)', () => {
    it.each(['127.0.0.1', 'localhost', '0.0.0.0'])('takes %s', async (host) => {
      expect((await loadServerConfig({ ...REQUIRED, HOST: host })).host).toBe(host);
    });

    it.each([
      ['not-a-host.invalid', 'a name that does not resolve'],
      // TEST-NET-3 (RFC 5737): never an address of this machine.
      ['203.0.113.7', 'not an address of this machine'],
    ])('refuses %s with one line naming HOST, beside the other invalid variables', async (host, why) => {
      const refused = loadServerConfig({ ...REQUIRED, HOST: host, LOCK_TTL_MS: '5' });
      await expect(refused).rejects.toThrow(ConfigError);
      await expect(refused).rejects.toMatchObject({
        lines: [
          'LOCK_TTL_MS must be an integer from 100 to 3600000, got "5"',
          `HOST must be an address or host name to listen on, got "${host}" (${why})`,
        ],
      });
    });
  });

  it('reads REDLOCK_URLS as a list', () => {
    const config = loadConfig({
      ...REQUIRED,
      LOCK_STRATEGY: 'redlock',
      REDLOCK_URLS: 'redis://a:1, redis://b:2,redis://c:3',
    });
    expect(config.redlockUrls).toEqual(['redis://a:1', 'redis://b:2', 'redis://c:3']);
  });

  it("reads FAULT_STOP_AT, the fault suite's self-stop hook, only with ALLOW_UNSAFE=1", () => {
    expect(loadConfig({ ...REQUIRED, FAULT_STOP_AT: 'before-write:3', ALLOW_UNSAFE: '1' }).faultStopAt).toEqual({
      point: 'before-write',
      nth: 3,
    });
  });

  it('reads FAULT_CLOCK_SKEW_MS, a test-only skew of the app clock, only with ALLOW_UNSAFE=1 and never in production', () => {
    expect(loadConfig({ ...REQUIRED, FAULT_CLOCK_SKEW_MS: '-2500', ALLOW_UNSAFE: '1' }).faultClockSkewMs).toBe(-2500);
    expect(() => loadConfig({ ...REQUIRED, FAULT_CLOCK_SKEW_MS: '5000' })).toThrow(/ALLOW_UNSAFE=1/);
    expect(() =>
      loadConfig({ ...REQUIRED, FAULT_CLOCK_SKEW_MS: '5000', ALLOW_UNSAFE: '1', NODE_ENV: 'production' }),
    ).toThrow(/never accepted with NODE_ENV=production/);
    expect(() => loadConfig({ ...REQUIRED, FAULT_CLOCK_SKEW_MS: '5s', ALLOW_UNSAFE: '1' })).toThrow(/integer of ms/);
  });

  it('reads REDIS_CLUSTER_NODES as the seed nodes of a cluster, with its login and TLS for every node', () => {
    const bare = loadConfig({ ADMIN_TOKEN: REQUIRED.ADMIN_TOKEN, REDIS_CLUSTER_NODES: '10.0.0.1:7000, node-b:7001' });
    expect(bare.redisUrl).toBeNull();
    expect(bare.redisCluster).toEqual({
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: 'node-b', port: 7001 },
      ],
      tls: false,
    });
    const secured = loadConfig({
      ADMIN_TOKEN: REQUIRED.ADMIN_TOKEN,
      REDIS_CLUSTER_NODES: 'rediss://app:s%40cret@a:7000,b:7001',
    });
    expect(secured.redisCluster).toEqual({
      nodes: [
        { host: 'a', port: 7000 },
        { host: 'b', port: 7001 },
      ],
      username: 'app',
      password: 's@cret',
      tls: true,
    });
  });

  it('reads an IPv6 seed in brackets', () => {
    const config = loadConfig({
      ADMIN_TOKEN: REQUIRED.ADMIN_TOKEN,
      REDIS_CLUSTER_NODES: '[::1]:7000,redis://[::1]:7001',
    });
    expect(config.redisCluster?.nodes).toEqual([
      { host: '::1', port: 7000 },
      { host: '::1', port: 7001 },
    ]);
  });

  it('treats blank values as unset', () => {
    expect(loadConfig({ ...REQUIRED, PORT: '  ', LOCK_STRATEGY: '' })).toMatchObject({
      port: 3000,
      lockStrategy: 'fenced',
    });
  });

  describe('the door: RATE_LIMIT_PER_IP, RATE_LIMIT_PER_USER, BUYER_AUTH', () => {
    const dir = mkdtempSync(join(tmpdir(), 'seckill-config-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const auth = { BUYER_AUTH_ISSUER: 'https://id.example', BUYER_AUTH_AUDIENCE: 'seckill' };
    const fails = (env: Record<string, string>, message: RegExp) =>
      expect(() => loadConfig({ ...REQUIRED, ...env })).toThrow(message);

    it('reads <count>/<window> in ms, s or m, to the millisecond', () => {
      expect(loadConfig({ ...REQUIRED, RATE_LIMIT_PER_IP: '20/1s', RATE_LIMIT_PER_USER: '5/2m' })).toMatchObject({
        rateLimitPerIp: { count: 20, windowMs: 1_000 },
        rateLimitPerUser: { count: 5, windowMs: 120_000 },
      });
      expect(loadConfig({ ...REQUIRED, RATE_LIMIT_PER_IP: '3/2000ms' }).rateLimitPerIp).toEqual({
        count: 3,
        windowMs: 2_000,
      });
      expect(loadConfig({ ...REQUIRED, RATE_LIMIT_PER_IP: '20/500ms' }).rateLimitPerIp).toEqual({
        count: 20,
        windowMs: 500,
      });
      expect(loadConfig({ ...REQUIRED, RATE_LIMIT_PER_IP: '5/1500ms' }).rateLimitPerIp?.windowMs).toBe(1_500);
    });

    it('refuses a malformed limit, a zero count, and an empty window or one over a day', () => {
      for (const bad of ['20', '20/s', '0/1s', '20/1h', 'ten/1s', '20/1 s', '2000000/1s']) {
        fails({ RATE_LIMIT_PER_IP: bad }, /^RATE_LIMIT_PER_IP must be <count>\/<window>, e\.g\. 20\/1s/);
      }
      for (const bad of ['5/0ms', '5/0s', '5/1441m', '5/86400001ms']) {
        fails({ RATE_LIMIT_PER_USER: bad }, /^RATE_LIMIT_PER_USER window must be from 1ms to 1440m, got/);
      }
    });

    it('reads hs256, spki-file, jwks-file and jwks URLs, with issuer and audience', () => {
      const secret = 'Qm9v3kR7_tXz1LwPa8dYc2Hn5GsJ0eVu';
      expect(loadConfig({ ...REQUIRED, ...auth, BUYER_AUTH: `hs256:${secret}` }).buyerAuth).toEqual({
        key: { kind: 'hs256', secret },
        issuer: 'https://id.example',
        audience: 'seckill',
      });
      const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const pem = ec.publicKey.export({ type: 'spki', format: 'pem' }).toString();
      expect(
        loadConfig({ ...REQUIRED, ...auth, BUYER_AUTH: `spki-file:${file('ec.pem', pem)}` }).buyerAuth?.key,
      ).toEqual({ kind: 'spki', pem, algorithm: 'ES256' });
      const ed = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();
      expect(
        loadConfig({ ...REQUIRED, ...auth, BUYER_AUTH: `spki-file:${file('ed.pem', ed)}` }).buyerAuth?.key,
      ).toMatchObject({ algorithm: 'EdDSA' });
      const jwk = ec.publicKey.export({ format: 'jwk' });
      const jwks = file('jwks.json', JSON.stringify({ keys: [jwk] }));
      expect(loadConfig({ ...REQUIRED, ...auth, BUYER_AUTH: `jwks-file:${jwks}` }).buyerAuth?.key).toEqual({
        kind: 'jwks',
        jwks: { keys: [jwk] },
      });
      expect(
        loadConfig({ ...REQUIRED, ...auth, BUYER_AUTH: 'jwks:https://id.example/.well-known/jwks.json' }).buyerAuth
          ?.key,
      ).toEqual({ kind: 'jwks-url', url: 'https://id.example/.well-known/jwks.json' });
    });

    it('refuses a weak secret, a private or unreadable key, plain http, an unknown form, a missing issuer or audience', () => {
      const secret = 'hs256:Qm9v3kR7_tXz1LwPa8dYc2Hn5GsJ0eVu';
      fails({ ...auth, BUYER_AUTH: 'hs256:short' }, /^BUYER_AUTH hs256: the secret must be at least 32 characters/);
      // Whoever guesses it buys as anyone: no repeats, no example values.
      fails({ ...auth, BUYER_AUTH: `hs256:${'a'.repeat(32)}` }, /^BUYER_AUTH hs256: the secret is too easy to guess/);
      fails({ ...auth, BUYER_AUTH: 'hs256:change-me-change-me-change-me-123' }, /looks like an example value/);
      fails({ ...auth, BUYER_AUTH: 'rs256:abc' }, /^BUYER_AUTH must be one of jwks:<https URL>, jwks-file:/);
      fails(
        { ...auth, BUYER_AUTH: 'jwks:http://id.example/jwks.json' },
        /^BUYER_AUTH jwks: the URL must be https:\/\//,
      );
      fails({ ...auth, BUYER_AUTH: `spki-file:${join(dir, 'missing.pem')}` }, /^BUYER_AUTH spki-file: cannot read/);
      const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const priv = pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
      fails({ ...auth, BUYER_AUTH: `spki-file:${file('priv.pem', priv)}` }, /must hold a public key/);
      // Keys that could not verify anything are refused at boot, not at every purchase.
      const weak = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey;
      fails(
        {
          ...auth,
          BUYER_AUTH: `spki-file:${file('weak.pem', weak.export({ type: 'spki', format: 'pem' }).toString())}`,
        },
        /RSA key of 1024 bits: at least 2048/,
      );
      const broken = { ...pair.publicKey.export({ format: 'jwk' }), x: 'AAAA' };
      fails(
        { ...auth, BUYER_AUTH: `jwks-file:${file('broken.json', JSON.stringify({ keys: [broken] }))}` },
        /key 0 is not a usable public key/,
      );
      const weakJwk = weak.export({ format: 'jwk' });
      fails(
        { ...auth, BUYER_AUTH: `jwks-file:${file('weak.json', JSON.stringify({ keys: [weakJwk] }))}` },
        /key 0 is an RSA key of 1024 bits/,
      );
      const privJwk = file('priv.json', JSON.stringify({ keys: [pair.privateKey.export({ format: 'jwk' })] }));
      fails({ ...auth, BUYER_AUTH: `jwks-file:${privJwk}` }, /holds a private or symmetric key/);
      fails({ ...auth, BUYER_AUTH: `jwks-file:${file('empty.json', '{"keys":[]}')}` }, /must be a JWK Set/);
      fails({ BUYER_AUTH_AUDIENCE: 'seckill', BUYER_AUTH: secret }, /^BUYER_AUTH_ISSUER is required with BUYER_AUTH/);
      fails({ BUYER_AUTH_ISSUER: 'i', BUYER_AUTH: secret }, /^BUYER_AUTH_AUDIENCE is required with BUYER_AUTH/);
      fails({ BUYER_AUTH_ISSUER: 'i' }, /^BUYER_AUTH_ISSUER is set but BUYER_AUTH is not/);
    });
  });

  describe('PAYMENT_WEBHOOK_SECRET', () => {
    it('is null unless set; a set one must be 32 characters and as hard to guess as any secret', () => {
      expect(loadConfig(REQUIRED).paymentWebhookSecret).toBeNull();
      const secret = 'Zk3r9Qw_Lp7xVb2Nc5Hj8Tg1Fd4Sa6Mu';
      expect(loadConfig({ ...REQUIRED, PAYMENT_WEBHOOK_SECRET: secret }).paymentWebhookSecret).toBe(secret);
      const fails = (value: string, message: RegExp) =>
        expect(() => loadConfig({ ...REQUIRED, PAYMENT_WEBHOOK_SECRET: value })).toThrow(message);
      fails('short', /^PAYMENT_WEBHOOK_SECRET must be at least 32 characters/);
      fails('b'.repeat(40), /^PAYMENT_WEBHOOK_SECRET is too easy to guess/);
      fails('whsec-example-example-example-1234', /^PAYMENT_WEBHOOK_SECRET looks like an example value/);
    });
  });
});
