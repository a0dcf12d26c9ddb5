import { DEFAULT_PAYMENT_TIMEOUT_MS, MAX_PAYMENT_TIMEOUT_MS, MIN_PAYMENT_TIMEOUT_MS } from '../sale/sale-limits';
import { ZxcvbnFactory } from '@zxcvbn-ts/core';
import { createPublicKey, type JsonWebKeyInput } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, isIP } from 'node:net';
import * as common from '@zxcvbn-ts/language-common';

/**
 * Environment -> typed, validated, frozen configuration.
 *
 * Frozen defaults plus validated env at boot (the node-redlock defaultSettings
 * pattern): a bad value stops the app with one line naming the variable, long
 * before the first buyer arrives.
 */

/** Correct locks: src/locks/strategies. */
const SAFE_LOCKS = ['lock', 'fenced', 'reentrant', 'redlock'] as const;
/** Purchases that need no lock: one Lua script, WATCH/MULTI/EXEC (src/orders/purchases). */
const LOCK_FREE = ['atomic', 'optimistic'] as const;
/** The negative control and the classic mistakes: they can oversell or lock forever. */
const UNSAFE = [
  'none',
  'setnx-no-ttl',
  'setnx-then-expire',
  'unchecked-del',
  'get-then-del',
  'expiry-timestamp',
] as const;

export const LOCK_STRATEGY_NAMES = [...SAFE_LOCKS, ...LOCK_FREE, ...UNSAFE] as const;
export type LockStrategyName = (typeof LOCK_STRATEGY_NAMES)[number];
/** The strategies that are a lock (src/locks builds them); the rest are lock-free purchases. */
export type LockName = (typeof SAFE_LOCKS)[number] | (typeof UNSAFE)[number];

/**
 * Which strategies may sell one product side by side (a rolling deploy, two versions
 * of the app on one Redis): those whose purchases exclude each other. `lock` and
 * `fenced` take the same SET NX PX lock; `atomic`'s script and `optimistic`'s WATCH
 * see each other's writes. Everything else excludes only its own kind: a lock-free
 * write does not wait for a lock holder, `reentrant`'s lock is a hash where `lock`'s
 * is a string, `redlock`'s lives on nodes of its own, and each mistake is its own.
 * The family that starts a sale is recorded with it; the others refuse that product.
 */
export function strategyFamily(name: LockStrategyName): string {
  if (name === 'lock' || name === 'fenced') return 'lock';
  if (name === 'atomic' || name === 'optimistic') return 'lock-free';
  return name;
}

/** Strategies that run only with ALLOW_UNSAFE=1, logged loudly at boot. */
export const UNSAFE_STRATEGIES: readonly LockStrategyName[] = UNSAFE;

/**
 * Test and fault mode only: the process stops itself (SIGSTOP) at a named point, so
 * the fault suite can freeze a lock holder at exactly that moment instead of hunting
 * for it. `before-write:2` = the second hold of this process that reaches its write,
 * right after its validity check. Accepted only with ALLOW_UNSAFE=1.
 */
/**
 * before-write: a lock holder (or an `optimistic` attempt) with its decision made, its write not yet sent.
 * settle-before-commit / settle-before-ack: the settler with a batch written to
 * PostgreSQL, before its COMMIT / after it and before its XACK.
 * sweep-between: the expiry sweeper between two expiries of one sweep.
 */
export const FAULT_POINTS = ['before-write', 'settle-before-commit', 'settle-before-ack', 'sweep-between'] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];
export interface FaultStop {
  readonly point: FaultPoint;
  /** Stop on the nth time the point is reached (1 = the first). */
  readonly nth: number;
}

/** LOG_LEVEL, under Nest's names. */
export const LOG_LEVELS = ['error', 'warn', 'log', 'debug', 'verbose'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/**
 * LOG_LEVEL under pino's names (the log is pino's), as the Nest level that writes the
 * same lines. The app logs nothing at fatal, and its errors are always written: fatal
 * and silent write what error does.
 */
const PINO_LEVEL_NAMES: ReadonlyMap<string, LogLevel> = new Map([
  ['trace', 'verbose'],
  ['debug', 'debug'],
  ['info', 'log'],
  ['warn', 'warn'],
  ['error', 'error'],
  ['fatal', 'error'],
  ['silent', 'error'],
]);

export interface AppConfig {
  readonly port: number;
  readonly host: string;
  /** The standalone Redis; null in cluster mode. */
  readonly redisUrl: string | null;
  /** REDIS_CLUSTER_NODES: the Redis Cluster to use instead of REDIS_URL; null in standalone mode. */
  readonly redisCluster: RedisClusterConfig | null;
  /** REDIS_WAIT_REPLICAS: replicas that must acknowledge an order's write before 201 (0: no WAIT). */
  readonly redisWaitReplicas: number;
  /** REDIS_WAIT_TIMEOUT_MS: how long WAIT may take before the order is answered OUTCOME_UNKNOWN. */
  readonly redisWaitTimeoutMs: number;
  /**
   * REDIS_ALLOW_EVICTION: serve on a Redis whose maxmemory-policy may evict keys. Only
   * for a Redis that can never fill: an evicted lock, fencing counter, buyers' count or
   * Idempotency-Key outcome breaks the promises (src/redis/redis-fitness.ts).
   */
  readonly redisAllowEviction: boolean;
  /** Independent Redis nodes for LOCK_STRATEGY=redlock; empty otherwise. */
  readonly redlockUrls: readonly string[];
  readonly lockStrategy: LockStrategyName;
  /**
   * SALE_CLOCK: whose clock the sale window is judged by. `redis` (the default and the
   * only safe one): the clock of the Redis that holds the sale, read in the step that
   * decides. `app`: this process's own clock, the naive guard peers use, kept only to
   * show it selling early from an app whose clock runs ahead (ALLOW_UNSAFE=1).
   */
  readonly saleClock: 'redis' | 'app';
  readonly lockTtlMs: number;
  readonly lockWaitMs: number;
  /**
   * TRUST_PROXY: which proxies' X-Forwarded-For names the client (Fastify's trustProxy):
   * false (unset: the client is the socket's peer), true (any: only behind a proxy that
   * overwrites the header), a hop count, or addresses, CIDRs and proxy-addr's keywords
   * (loopback, linklocal, uniquelocal). Per-client bounds (the live streams) count by it.
   */
  readonly trustProxy: boolean | number | readonly string[];
  /** How long a client may take to send one whole request (headers and body) before 408. */
  readonly requestTimeoutMs: number;
  /** From SIGTERM/SIGINT to exit at the latest: what is still open then is cut (src/main.ts). */
  readonly shutdownTimeoutMs: number;
  readonly adminToken: string;
  readonly keyPrefix: string;
  readonly allowUnsafe: boolean;
  readonly logLevel: LogLevel;
  /** TELEMETRY: record metrics and the dashboard's aggregate (0 turns both off, to measure what they cost). */
  readonly telemetry: boolean;
  /** FAULT_STOP_AT; null in every real deployment. */
  readonly faultStopAt: FaultStop | null;
  /**
   * FAULT_CLOCK_SKEW_MS: this process's clock runs that many ms ahead (negative: behind)
   * wherever the app reads its own clock; for the tests only (0 in every real deployment).
   */
  readonly faultClockSkewMs: number;
  /** DATABASE_URL: the PostgreSQL orders are settled into; null: no settlement (orders stay in Redis only). */
  readonly databaseUrl: string | null;
  /** PAYMENT_TIMEOUT_MS: how long a reservation waits for its payment, unless the sale's PUT says otherwise. */
  readonly paymentTimeoutMs: number;
  /** PG_STATEMENT_TIMEOUT_MS: the longest a PostgreSQL statement may run (a paused server is given up on). */
  readonly pgStatementTimeoutMs: number;
  /** SETTLE_BATCH: stream entries settled in one PostgreSQL transaction, at most. */
  readonly settleBatch: number;
  /** SETTLE_CLAIM_IDLE_MS: how long an entry delivered to a consumer may stay unacknowledged before another claims it. */
  readonly settleClaimIdleMs: number;
  /** EXPIRY_SWEEP_MS: how often this instance sweeps the reservations whose payment deadline passed. */
  readonly expirySweepMs: number;
  /** SETTLE_TRIM: trim each order stream of what every consumer group has settled (off: the stream keeps every entry). */
  readonly settleTrim: boolean;
  /** RATE_LIMIT_PER_IP: requests one client address may make to the door's routes per window; null: no limit. */
  readonly rateLimitPerIp: RateLimit | null;
  /** RATE_LIMIT_PER_USER: the same per buyer (the token's sub with BUYER_AUTH, else the body's userId); null: no limit. */
  readonly rateLimitPerUser: RateLimit | null;
  /** BUYER_AUTH (+ _ISSUER, _AUDIENCE): who may buy as whom; null: the body's userId is taken on trust. */
  readonly buyerAuth: BuyerAuthConfig | null;
  /**
   * PAYMENT_WEBHOOK_SECRET: the key the payment provider signs its callbacks with
   * (`Payment-Signature`, src/door/payment-signature.ts); null: only the admin token may
   * mark an order paid.
   */
  readonly paymentWebhookSecret: string | null;
}

/** `<count>/<window>`: at most `count` requests in each fixed window of `windowMs` (src/door/rate-limits.ts). */
export interface RateLimit {
  readonly count: number;
  readonly windowMs: number;
}

/** The JWS algorithms a buyer token may be signed with when the key is a JWKS: asymmetric only, never `none` or HMAC. */
export const JWKS_ALGORITHMS = ['RS256', 'PS256', 'ES256', 'ES384', 'EdDSA', 'Ed25519'] as const;

/**
 * Where the key that verifies buyer tokens comes from, and the one algorithm (or, for a
 * JWKS, the asymmetric algorithms) it is used with: a token's `alg` header never
 * chooses the algorithm by itself (the RFC 8725 `alg` confusion).
 */
export type BuyerKey =
  | { readonly kind: 'hs256'; readonly secret: string }
  | { readonly kind: 'spki'; readonly pem: string; readonly algorithm: 'RS256' | 'ES256' | 'ES384' | 'EdDSA' }
  | { readonly kind: 'jwks'; readonly jwks: { readonly keys: readonly Record<string, unknown>[] } }
  | { readonly kind: 'jwks-url'; readonly url: string };

export interface BuyerAuthConfig {
  readonly key: BuyerKey;
  /** BUYER_AUTH_ISSUER: the `iss` every token must carry. */
  readonly issuer: string;
  /** BUYER_AUTH_AUDIENCE: the `aud` every token must name (this service). */
  readonly audience: string;
}

/** Where a Redis Cluster's seed nodes are and how to log in to every node (REDIS_CLUSTER_NODES). */
export interface RedisClusterConfig {
  /** Seed nodes: the client learns the rest (masters, replicas, slots) from them. */
  readonly nodes: readonly { readonly host: string; readonly port: number }[];
  readonly username?: string;
  readonly password?: string;
  /** rediss:// entries: TLS to every node. */
  readonly tls: boolean;
}

export const CONFIG_DEFAULTS = Object.freeze({
  port: 3000,
  host: '0.0.0.0',
  // The default write is one Lua script that Redis runs only if no later lock was
  // issued, so a holder paused past its TTL, or a write delayed or replayed past the
  // next acquisition, changes nothing. `lock` stays the textbook lock whose MULTI
  // nothing checks: it shows that late write (docs/strategies.md).
  lockStrategy: 'fenced',
  lockTtlMs: 10_000,
  lockWaitMs: 5_000,
  requestTimeoutMs: 10_000,
  // Below `docker stop`'s 10 s, so the app exits on its own before SIGKILL; above the
  // default LOCK_WAIT_MS, so a buyer waiting for the lock at SIGTERM usually hears 201 or
  // LOCK_TIMEOUT first (one still in progress at the deadline hears OUTCOME_UNKNOWN).
  shutdownTimeoutMs: 8_000,
  keyPrefix: 'seckill:',
  allowUnsafe: false,
  logLevel: 'log',
  telemetry: true,
  redisWaitReplicas: 0,
  redisWaitTimeoutMs: 500,
  redisAllowEviction: false,
  paymentTimeoutMs: DEFAULT_PAYMENT_TIMEOUT_MS,
  pgStatementTimeoutMs: 5_000,
  settleBatch: 1_000,
  settleClaimIdleMs: 10_000,
  expirySweepMs: 500,
  settleTrim: false,
} as const satisfies Partial<AppConfig>);

/** Every environment variable the app reads; docker-compose.yml is checked against it. */
export const CONFIG_ENV_NAMES = [
  'PORT',
  'HOST',
  'REDIS_URL',
  'REDIS_CLUSTER_NODES',
  'REDIS_WAIT_REPLICAS',
  'REDIS_WAIT_TIMEOUT_MS',
  'REDIS_ALLOW_EVICTION',
  'REDLOCK_URLS',
  'LOCK_STRATEGY',
  'SALE_CLOCK',
  'LOCK_TTL_MS',
  'LOCK_WAIT_MS',
  'REQUEST_TIMEOUT_MS',
  'TRUST_PROXY',
  'SHUTDOWN_TIMEOUT_MS',
  'ADMIN_TOKEN',
  'KEY_PREFIX',
  'ALLOW_UNSAFE',
  'LOG_LEVEL',
  'TELEMETRY',
  'FAULT_STOP_AT',
  'FAULT_CLOCK_SKEW_MS',
  'DATABASE_URL',
  'PAYMENT_TIMEOUT_MS',
  'PG_STATEMENT_TIMEOUT_MS',
  'SETTLE_BATCH',
  'SETTLE_CLAIM_IDLE_MS',
  'EXPIRY_SWEEP_MS',
  'SETTLE_TRIM',
  'RATE_LIMIT_PER_IP',
  'RATE_LIMIT_PER_USER',
  'BUYER_AUTH',
  'BUYER_AUTH_ISSUER',
  'BUYER_AUTH_AUDIENCE',
  'PAYMENT_WEBHOOK_SECRET',
] as const;

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Invalid configuration: one line per invalid variable, `<VARIABLE> <what is wrong>`,
 * this one's first. loadConfig throws one holding every line it found.
 */
export class ConfigError extends Error {
  readonly lines: readonly string[];

  constructor(
    readonly variable: string,
    readonly detail: string,
    others: readonly ConfigError[] = [],
  ) {
    const lines = [`${variable} ${detail}`, ...others.flatMap((e) => e.lines)];
    super(lines.join('\n'));
    this.lines = lines;
    this.name = 'ConfigError';
  }

  /** One error naming every one of `problems` (at least one), in their order. */
  static all(problems: readonly ConfigError[]): ConfigError {
    const [first, ...others] = problems;
    return new ConfigError(first.variable, first.detail, others);
  }
}

export function loadConfig(env: Env): AppConfig {
  const { config, problems } = readConfig(env);
  if (problems.length > 0) throw ConfigError.all(problems);
  return config;
}

/**
 * loadConfig for the process that listens (main.ts), with what only this machine can
 * tell: whether HOST is an address it can listen on. A name that does not resolve, or
 * an address that is not this machine's, is one more line of the same error, where
 * listen() would have failed with a stack trace after the app was built.
 */
export async function loadServerConfig(env: Env): Promise<AppConfig> {
  const { config, problems } = readConfig(env);
  if (!problems.some((p) => p.variable === 'HOST')) {
    const problem = await listenProblem(config.host);
    if (problem) problems.push(problem);
  }
  if (problems.length > 0) throw ConfigError.all(problems);
  return config;
}

/**
 * Every variable read, each bad one noted and read on as if unset, so that one start
 * names them all. `config` is whole only when `problems` is empty.
 */
function readConfig(env: Env): { config: AppConfig; problems: ConfigError[] } {
  const problems: ConfigError[] = [];
  /** `parse()`'s value, or undefined with its problem noted. */
  const read = <T>(parse: () => T): T | undefined => {
    try {
      return parse();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      problems.push(err);
      return undefined;
    }
  };
  const config = {
    port: read(() => int(env, 'PORT', CONFIG_DEFAULTS.port, 0, 65_535)),
    host: read(() => host(env)),
    ...read(() => redisTarget(env)),
    // WAIT needs replicas to answer it; more than a handful per master is not a sale's setup.
    redisWaitReplicas: read(() => int(env, 'REDIS_WAIT_REPLICAS', CONFIG_DEFAULTS.redisWaitReplicas, 0, 16)),
    redisWaitTimeoutMs: read(() => int(env, 'REDIS_WAIT_TIMEOUT_MS', CONFIG_DEFAULTS.redisWaitTimeoutMs, 1, 60_000)),
    redisAllowEviction: read(() => bool(env, 'REDIS_ALLOW_EVICTION', CONFIG_DEFAULTS.redisAllowEviction)),
    redlockUrls: read(() => redlockUrls(env)),
    lockStrategy: read(() => oneOf(env, 'LOCK_STRATEGY', LOCK_STRATEGY_NAMES, CONFIG_DEFAULTS.lockStrategy)),
    saleClock: read(() => oneOf(env, 'SALE_CLOCK', ['redis', 'app'] as const, 'redis')),
    // The TTL bounds the damage of a crashed holder; below 100 ms a slow Redis
    // round trip alone could outlive the lock.
    lockTtlMs: read(() => int(env, 'LOCK_TTL_MS', CONFIG_DEFAULTS.lockTtlMs, 100, 3_600_000)),
    lockWaitMs: read(() => int(env, 'LOCK_WAIT_MS', CONFIG_DEFAULTS.lockWaitMs, 0, 600_000)),
    // Node checks request deadlines once a second (create-app.ts), so less than a
    // second would not be kept; no upper limit would let a slow client hold a socket forever.
    requestTimeoutMs: read(() => int(env, 'REQUEST_TIMEOUT_MS', CONFIG_DEFAULTS.requestTimeoutMs, 1_000, 600_000)),
    trustProxy: read(() => trustProxy(env)),
    shutdownTimeoutMs: read(() => int(env, 'SHUTDOWN_TIMEOUT_MS', CONFIG_DEFAULTS.shutdownTimeoutMs, 100, 600_000)),
    adminToken: read(() => adminToken(env)),
    keyPrefix: read(() => keyPrefix(env)),
    allowUnsafe: read(() => bool(env, 'ALLOW_UNSAFE', CONFIG_DEFAULTS.allowUnsafe)),
    logLevel: read(() => logLevel(env)),
    telemetry: read(() => bool(env, 'TELEMETRY', CONFIG_DEFAULTS.telemetry)),
    faultStopAt: read(() => faultStop(env)),
    faultClockSkewMs: read(() => clockSkew(env)),
    databaseUrl: read(() => databaseUrl(env)),
    paymentTimeoutMs: read(() =>
      int(env, 'PAYMENT_TIMEOUT_MS', CONFIG_DEFAULTS.paymentTimeoutMs, MIN_PAYMENT_TIMEOUT_MS, MAX_PAYMENT_TIMEOUT_MS),
    ),
    pgStatementTimeoutMs: read(() =>
      int(env, 'PG_STATEMENT_TIMEOUT_MS', CONFIG_DEFAULTS.pgStatementTimeoutMs, 100, 600_000),
    ),
    settleBatch: read(() => int(env, 'SETTLE_BATCH', CONFIG_DEFAULTS.settleBatch, 1, 10_000)),
    settleClaimIdleMs: read(() => int(env, 'SETTLE_CLAIM_IDLE_MS', CONFIG_DEFAULTS.settleClaimIdleMs, 100, 3_600_000)),
    expirySweepMs: read(() => int(env, 'EXPIRY_SWEEP_MS', CONFIG_DEFAULTS.expirySweepMs, 10, 60_000)),
    settleTrim: read(() => bool(env, 'SETTLE_TRIM', CONFIG_DEFAULTS.settleTrim)),
    rateLimitPerIp: read(() => rateLimit(env, 'RATE_LIMIT_PER_IP')),
    rateLimitPerUser: read(() => rateLimit(env, 'RATE_LIMIT_PER_USER')),
    buyerAuth: read(() => buyerAuth(env)),
    paymentWebhookSecret: read(() => paymentWebhookSecret(env)),
  };
  // The rules between variables, each judged only when the variables it reads are
  // valid (an invalid one is named once, by its own line).
  const refuse = (variable: string, detail: string) => problems.push(new ConfigError(variable, detail));
  const production = env.NODE_ENV?.trim().toLowerCase() === 'production';
  if (config.lockStrategy === 'redlock' && config.redlockUrls?.length === 0) {
    refuse(
      'REDLOCK_URLS',
      'is required with LOCK_STRATEGY=redlock: comma-separated URLs of independent Redis nodes (3 or 5); `npm start` starts 3 for you',
    );
  }
  if (config.lockStrategy && UNSAFE_STRATEGIES.includes(config.lockStrategy) && config.allowUnsafe === false) {
    refuse(
      'LOCK_STRATEGY',
      `"${config.lockStrategy}" can oversell and runs only as a demonstration: set ALLOW_UNSAFE=1 to allow it`,
    );
  }
  if (config.saleClock === 'app' && config.allowUnsafe === false) {
    refuse(
      'SALE_CLOCK',
      '"app" judges the sale window by this process\'s clock, which can open the sale early: set ALLOW_UNSAFE=1 to allow it',
    );
  }
  // Production first: with NODE_ENV=production no other setting makes it acceptable.
  if (config.faultStopAt && production) {
    refuse('FAULT_STOP_AT', 'makes the app stop itself and is never accepted with NODE_ENV=production');
  } else if (config.faultStopAt && config.allowUnsafe === false) {
    refuse(
      'FAULT_STOP_AT',
      'makes the app stop itself and is for the fault suite only: set ALLOW_UNSAFE=1 to allow it',
    );
  }
  if (config.faultClockSkewMs && production) {
    refuse('FAULT_CLOCK_SKEW_MS', "skews the app's clock and is never accepted with NODE_ENV=production");
  } else if (config.faultClockSkewMs && config.allowUnsafe === false) {
    refuse('FAULT_CLOCK_SKEW_MS', "skews the app's clock and is for the tests only: set ALLOW_UNSAFE=1 to allow it");
  }
  return { config: Object.freeze(config) as AppConfig, problems };
}

/**
 * Why this machine cannot listen on `host`, or null: asked by listening on a free port
 * of it for a moment, which resolves the name and binds the address as listen() will.
 */
async function listenProblem(host: string): Promise<ConfigError | null> {
  const server = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, host, resolve);
    });
    return null;
  } catch (err) {
    const { code, message } = err as NodeJS.ErrnoException;
    const why =
      code === 'ENOTFOUND' || code === 'EAI_AGAIN'
        ? 'a name that does not resolve'
        : code === 'EADDRNOTAVAIL'
          ? 'not an address of this machine'
          : message;
    return new ConfigError('HOST', `must be an address or host name to listen on, got "${host}" (${why})`);
  } finally {
    server.close();
  }
}

function clockSkew(env: Env): number {
  const value = raw(env, 'FAULT_CLOCK_SKEW_MS');
  if (value === undefined) return 0;
  if (!/^-?\d{1,9}$/.test(value) || Math.abs(Number(value)) > 86_400_000) {
    throw new ConfigError('FAULT_CLOCK_SKEW_MS', `must be an integer of ms from -86400000 to 86400000, got "${value}"`);
  }
  return Number(value);
}

/** A day: longer windows are a quota, not a rate limit. */
const MAX_RATE_WINDOW_MS = 86_400_000;
const WINDOW_UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000 };

function rateLimit(env: Env, name: string): RateLimit | null {
  const value = raw(env, name);
  if (value === undefined) return null;
  const parsed = /^(\d{1,7})\/(\d{1,8})(ms|s|m)$/.exec(value);
  const count = Number(parsed?.[1]);
  if (!parsed || count < 1 || count > 1_000_000) {
    throw new ConfigError(
      name,
      `must be <count>/<window>, e.g. 20/1s: count 1..1000000, the window in ms, s or m; got "${value}"`,
    );
  }
  const windowMs = Number(parsed[2]) * WINDOW_UNIT_MS[parsed[3]];
  if (windowMs < 1 || windowMs > MAX_RATE_WINDOW_MS) {
    throw new ConfigError(name, `window must be from 1ms to 1440m, got "${value}"`);
  }
  return { count, windowMs };
}

function buyerAuth(env: Env): BuyerAuthConfig | null {
  const value = raw(env, 'BUYER_AUTH');
  const issuer = raw(env, 'BUYER_AUTH_ISSUER');
  const audience = raw(env, 'BUYER_AUTH_AUDIENCE');
  if (value === undefined) {
    // A half-configured check is worse than none: the operator thinks tokens are checked.
    const stray = issuer !== undefined ? 'BUYER_AUTH_ISSUER' : audience !== undefined ? 'BUYER_AUTH_AUDIENCE' : null;
    if (stray) throw new ConfigError(stray, 'is set but BUYER_AUTH is not: set BUYER_AUTH too, or unset it');
    return null;
  }
  if (issuer === undefined) {
    throw new ConfigError('BUYER_AUTH_ISSUER', 'is required with BUYER_AUTH: the `iss` your token issuer writes');
  }
  if (audience === undefined) {
    throw new ConfigError(
      'BUYER_AUTH_AUDIENCE',
      'is required with BUYER_AUTH: the `aud` your tokens name this service by',
    );
  }
  return { key: buyerKey(value), issuer, audience };
}

const BUYER_AUTH_FORMS =
  'jwks:<https URL>, jwks-file:<path>, spki-file:<path to a PEM public key> or hs256:<secret of 32+ characters>';

function buyerKey(value: string): BuyerKey {
  const name = 'BUYER_AUTH';
  const colon = value.indexOf(':');
  const kind = colon < 0 ? '' : value.slice(0, colon);
  const rest = colon < 0 ? '' : value.slice(colon + 1);
  if (kind === 'hs256') {
    // RFC 7518 3.2: an HS256 key is at least as long as the hash, 256 bits.
    if (rest.length < 32) throw new ConfigError(name, 'hs256: the secret must be at least 32 characters (256 bits)');
    // Whoever guesses it mints a token for any `sub` and buys as anyone: as hard to
    // guess as the admin token at least, and never an example value.
    const weak = secretWeakness(rest);
    if (weak) throw new ConfigError(name, `hs256: the secret ${weak}; use \`openssl rand -base64 32\``);
    return { kind, secret: rest };
  }
  if (kind === 'jwks') {
    let url: URL;
    try {
      url = new URL(rest);
    } catch {
      throw new ConfigError(name, `jwks: "${rest}" is not a URL`);
    }
    // Keys fetched in the clear can be swapped by anyone on the path; loopback is a sidecar or a test.
    const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
      throw new ConfigError(name, `jwks: the URL must be https:// (http:// only on loopback), got "${rest}"`);
    }
    return { kind: 'jwks-url', url: url.href };
  }
  if (kind === 'jwks-file' || kind === 'spki-file') {
    let text: string;
    try {
      text = readFileSync(rest, 'utf8');
    } catch (err) {
      throw new ConfigError(name, `${kind}: cannot read "${rest}": ${(err as Error).message}`);
    }
    return kind === 'jwks-file' ? jwksFile(rest, text) : spkiFile(rest, text);
  }
  throw new ConfigError(name, `must be one of ${BUYER_AUTH_FORMS}; got "${kind || value.slice(0, 20)}..."`);
}

function jwksFile(path: string, text: string): BuyerKey {
  let jwks: unknown;
  try {
    jwks = JSON.parse(text);
  } catch {
    throw new ConfigError('BUYER_AUTH', `jwks-file: "${path}" is not JSON`);
  }
  const keys = (jwks as { keys?: unknown })?.keys;
  if (!Array.isArray(keys) || keys.length === 0 || keys.some((k) => typeof k !== 'object' || k === null)) {
    throw new ConfigError(
      'BUYER_AUTH',
      `jwks-file: "${path}" must be a JWK Set, {"keys": [...]}, with at least one key`,
    );
  }
  // A private or symmetric key in a file of public keys is a leak waiting to be served.
  if (keys.some((k: Record<string, unknown>) => k.kty === 'oct' || 'd' in k)) {
    throw new ConfigError('BUYER_AUTH', `jwks-file: "${path}" holds a private or symmetric key: give public keys only`);
  }
  // Each key imported now, so a key that cannot verify (malformed, RSA under 2048 bits)
  // stops the app at boot, not every buyer at sale time.
  for (const [i, k] of keys.entries()) {
    let imported: ReturnType<typeof createPublicKey>;
    try {
      imported = createPublicKey({ key: k as JsonWebKeyInput['key'], format: 'jwk' });
    } catch (err) {
      throw new ConfigError(
        'BUYER_AUTH',
        `jwks-file: "${path}" key ${i} is not a usable public key: ${(err as Error).message}`,
      );
    }
    strongEnough(imported, `jwks-file: "${path}" key ${i}`);
  }
  return { kind: 'jwks', jwks: { keys } };
}

/** RS256 needs 2048 bits (RFC 7518 3.3); jose refuses less at every verification, so refuse it at boot. */
function strongEnough(key: ReturnType<typeof createPublicKey>, what: string): void {
  const bits = key.asymmetricKeyDetails?.modulusLength;
  if (key.asymmetricKeyType === 'rsa' && (bits ?? 0) < 2048) {
    throw new ConfigError('BUYER_AUTH', `${what} is an RSA key of ${bits} bits: at least 2048 are needed`);
  }
}

function spkiFile(path: string, pem: string): BuyerKey {
  let key: ReturnType<typeof createPublicKey>;
  try {
    key = createPublicKey(pem);
  } catch {
    throw new ConfigError('BUYER_AUTH', `spki-file: "${path}" is not a PEM public key`);
  }
  if (!pem.includes('-----BEGIN PUBLIC KEY-----')) {
    throw new ConfigError('BUYER_AUTH', `spki-file: "${path}" must hold a public key (-----BEGIN PUBLIC KEY-----)`);
  }
  strongEnough(key, `spki-file: "${path}"`);
  const type = key.asymmetricKeyType;
  const curve = key.asymmetricKeyDetails?.namedCurve;
  // The key decides the one algorithm tokens may use.
  const algorithm =
    type === 'rsa'
      ? 'RS256'
      : type === 'ed25519'
        ? 'EdDSA'
        : type === 'ec' && curve === 'prime256v1'
          ? 'ES256'
          : type === 'ec' && curve === 'secp384r1'
            ? 'ES384'
            : undefined;
  if (!algorithm) {
    throw new ConfigError(
      'BUYER_AUTH',
      `spki-file: "${path}" is a ${type}${curve ? ` ${curve}` : ''} key; use RSA (RS256), EC P-256 (ES256), P-384 (ES384) or Ed25519 (EdDSA)`,
    );
  }
  return { kind: 'spki', pem, algorithm };
}

function databaseUrl(env: Env): string | null {
  const value = raw(env, 'DATABASE_URL');
  if (value === undefined) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError('DATABASE_URL', 'must be a postgres:// or postgresql:// URL');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ConfigError('DATABASE_URL', `must be a postgres:// or postgresql:// URL, got "${url.protocol}"`);
  }
  return value;
}

function faultStop(env: Env): FaultStop | null {
  const value = raw(env, 'FAULT_STOP_AT');
  if (value === undefined) return null;
  const [point, nth] = value.split(':');
  if (!(FAULT_POINTS as readonly string[]).includes(point) || !/^[1-9]\d{0,5}$/.test(nth ?? '')) {
    throw new ConfigError(
      'FAULT_STOP_AT',
      `must be <point>:<n> with a point of ${FAULT_POINTS.join(', ')} and n >= 1, got "${value}"`,
    );
  }
  return { point: point as FaultPoint, nth: Number(nth) };
}

function raw(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === '' ? undefined : value;
}

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) {
    throw new ConfigError(name, `must be an integer from ${min} to ${max}, got "${value}"`);
  }
  return Number(value);
}

function bool(env: Env, name: string, fallback: boolean): boolean {
  const value = raw(env, name)?.toLowerCase();
  if (value === undefined) return fallback;
  if (value === '1' || value === 'true') return true;
  if (value === '0' || value === 'false') return false;
  throw new ConfigError(name, `must be 1, 0, true or false, got "${value}"`);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(value)) {
    throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${value}"`);
  }
  return value as T;
}

function logLevel(env: Env): LogLevel {
  const value = raw(env, 'LOG_LEVEL')?.toLowerCase();
  if (value === undefined) return CONFIG_DEFAULTS.logLevel;
  const level = (LOG_LEVELS as readonly string[]).includes(value) ? (value as LogLevel) : PINO_LEVEL_NAMES.get(value);
  if (level === undefined) {
    throw new ConfigError(
      'LOG_LEVEL',
      `must be one of ${LOG_LEVELS.join(', ')}, or pino's ${[...PINO_LEVEL_NAMES.keys()].join(', ')}; got "${value}"`,
    );
  }
  return level;
}

function trustProxy(env: Env): AppConfig['trustProxy'] {
  const value = raw(env, 'TRUST_PROXY')?.toLowerCase();
  if (value === undefined || value === 'false' || value === '0') return false;
  if (value === 'true') return true;
  if (/^\d{1,2}$/.test(value)) return Number(value);
  const entries = value.split(',').map((e) => e.trim());
  const keyword = /^(loopback|linklocal|uniquelocal)$/;
  // An address as Node reads one (isIP), and a range's bits within its family's: what
  // the proxy check's BlockList (src/trusted-proxy.ts) takes.
  const usable = (entry: string) => {
    const [address, bits, more] = entry.split('/');
    const family = isIP(address);
    if (family === 0 || more !== undefined) return false;
    return bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128));
  };
  const bad = entries.find((e) => !keyword.test(e) && !usable(e));
  if (bad !== undefined) {
    throw new ConfigError(
      'TRUST_PROXY',
      `must be true, false, a hop count, or a comma-separated list of addresses, CIDRs, loopback, linklocal or uniquelocal; got "${bad}"`,
    );
  }
  return entries;
}

function host(env: Env): string {
  const value = raw(env, 'HOST');
  if (value === undefined) return CONFIG_DEFAULTS.host;
  if (!/^[A-Za-z0-9.:_-]+$/.test(value)) {
    throw new ConfigError('HOST', `must be an address or host name to listen on, got "${value}"`);
  }
  return value;
}

/** REDIS_URL (standalone) or REDIS_CLUSTER_NODES (cluster): exactly one of them. */
function redisTarget(env: Env): Pick<AppConfig, 'redisUrl' | 'redisCluster'> {
  const url = raw(env, 'REDIS_URL');
  const nodes = raw(env, 'REDIS_CLUSTER_NODES');
  if (nodes === undefined) return { redisUrl: checkRedisUrl('REDIS_URL', url), redisCluster: null };
  if (url !== undefined) {
    throw new ConfigError(
      'REDIS_CLUSTER_NODES',
      'and REDIS_URL are both set: set REDIS_URL for one Redis, or REDIS_CLUSTER_NODES for a Redis Cluster, not both',
    );
  }
  return { redisUrl: null, redisCluster: redisCluster(nodes) };
}

/**
 * `host:port,host:port` or `redis[s]://[user:password@]host:port,...`: the seed nodes
 * of a Redis Cluster. Credentials and TLS apply to every node the client finds, so
 * the URL entries must agree on them.
 */
function redisCluster(value: string): RedisClusterConfig {
  const name = 'REDIS_CLUSTER_NODES';
  const entries = value.split(',').map((e) => e.trim());
  if (entries.includes('')) throw new ConfigError(name, `has an empty entry: "${value}"`);
  const parsed = entries.map((entry) => {
    const hasScheme = /^[a-z]+:\/\//i.test(entry);
    // `::1:7000` cannot say where the address ends and the port begins.
    const ipv6 = /^(.*:.*):(\d+)$/.exec(hasScheme ? entry.replace(/^[a-z]+:\/\/([^@/]*@)?/i, '') : entry);
    if (ipv6 && !ipv6[1].startsWith('[')) {
      throw new ConfigError(name, `entry "${entry}": write an IPv6 address in brackets, [${ipv6[1]}]:${ipv6[2]}`);
    }
    const url = checkRedisUrl(name, hasScheme ? entry : `redis://${entry}`);
    const { protocol, hostname, port, username, password, pathname, search } = new URL(url);
    if (!port || !/^\d+$/.test(port)) throw new ConfigError(name, `entry "${entry}" needs a port (host:port)`);
    // The URL parser takes 0 (but not 65536): no node listens there.
    if (Number(port) === 0) throw new ConfigError(name, `entry "${entry}" has port 0: a port is 1-65535`);
    if (pathname !== '' && pathname !== '/' && pathname !== '/0') {
      throw new ConfigError(name, `entry "${entry}" names a database: a Redis Cluster has only database 0`);
    }
    // ioredis reads options such as ?password= from a standalone URL; here they would be dropped.
    if (search !== '') {
      throw new ConfigError(
        name,
        `entry "${entry}" has a query string: give the login as redis://user:password@host:port`,
      );
    }
    let login: { username: string; password: string };
    try {
      login = { username: decodeURIComponent(username), password: decodeURIComponent(password) };
    } catch {
      throw new ConfigError(
        name,
        `entry "${entry}" has a malformed %-escape in its user or password: write % as %25 (and @ as %40, : as %3A)`,
      );
    }
    return {
      // Host names are case-insensitive, and the URL parser keeps a redis:// host's case.
      node: { host: hostname.replace(/^\[(.*)\]$/, '$1').toLowerCase(), port: Number(port) },
      login: `${protocol}|${login.username}|${login.password}`,
      tls: protocol === 'rediss:',
      ...login,
    };
  });
  // A bare host:port carries no login: it takes the one the URL entries give, if any.
  const logins = new Set(parsed.filter((_, i) => /^[a-z]+:\/\//i.test(entries[i])).map((p) => p.login));
  if (logins.size > 1) {
    throw new ConfigError(name, 'entries disagree on the scheme, user or password: every node is reached the same way');
  }
  const keys = parsed.map((p) => `${p.node.host}:${p.node.port}`);
  if (new Set(keys).size !== keys.length) throw new ConfigError(name, 'lists the same node twice');
  const first = parsed.find((_, i) => /^[a-z]+:\/\//i.test(entries[i])) ?? parsed[0];
  return {
    nodes: parsed.map((p) => p.node),
    ...(first.username ? { username: first.username } : {}),
    ...(first.password ? { password: first.password } : {}),
    tls: first.tls,
  };
}

function checkRedisUrl(name: string, value: string | undefined): string {
  if (value === undefined) {
    throw new ConfigError(
      name,
      'is required (for example redis://127.0.0.1:6380/0), or REDIS_CLUSTER_NODES for a Redis Cluster; `npm start` starts a private Redis and sets it for you',
    );
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(name, `is not a URL: "${value}"`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw new ConfigError(name, `must start with redis:// or rediss://, got "${url.protocol}//"`);
  }
  return value;
}

function redlockUrls(env: Env): string[] {
  const value = raw(env, 'REDLOCK_URLS');
  if (value === undefined) return [];
  const urls = value.split(',').map((u) => u.trim());
  if (urls.includes('')) throw new ConfigError('REDLOCK_URLS', `has an empty entry: "${value}"`);
  for (const url of urls) checkRedisUrl('REDLOCK_URLS', url);
  if (new Set(urls).size !== urls.length) throw new ConfigError('REDLOCK_URLS', 'lists the same node twice');
  return urls;
}

/**
 * Example values that documentation, compose files and tutorials show for a token:
 * long enough to pass a length check, and known to anyone who read the same page.
 * Compared with letters and digits only, case folded (`Change_Me` is `changeme`).
 */
const EXAMPLE_TOKEN_WORDS = [
  'changeme',
  'example',
  'placeholder',
  'yoursecret',
  'yourtoken',
  'replaceme',
  'secret',
  'password',
];

/**
 * The fewest guesses an attacker should need for ADMIN_TOKEN, as a power of ten
 * (10^19, about 63 bits), by zxcvbn's estimate (@zxcvbn-ts): it knows keyboard rows,
 * sequences (`abcdefghijklmnop`, `0123456789...`), repeats, dates, l33t and common
 * words and passwords, which a count of distinct characters does not. A random
 * 24-byte token (`openssl rand -base64 24`, what `npm start` generates) is at its cap.
 */
export const MIN_ADMIN_TOKEN_GUESSES_LOG10 = 19;

let strength: ZxcvbnFactory | undefined;
/** log10 of the guesses zxcvbn estimates `token` needs (its matchers built once, on first use). */
export function tokenGuessesLog10(token: string): number {
  strength ??= new ZxcvbnFactory({ dictionary: { ...common.dictionary }, graphs: common.adjacencyGraphs });
  return strength.check(token).guessesLog10;
}

function adminToken(env: Env): string {
  const value = raw(env, 'ADMIN_TOKEN');
  const generate = '`npm start` generates one when it is unset; or `openssl rand -base64 24`';
  if (value === undefined || value.length < 16) {
    throw new ConfigError('ADMIN_TOKEN', `is required and must be at least 16 characters (${generate})`);
  }
  const weak = secretWeakness(value);
  if (weak?.startsWith('looks like')) {
    throw new ConfigError(
      'ADMIN_TOKEN',
      `${weak}: anyone who read the same example can start and reset sales; use a random secret (${generate})`,
    );
  }
  if (weak) {
    throw new ConfigError(
      'ADMIN_TOKEN',
      `${weak.replace(' needed', ' needed: no words, sequences or keyboard rows')}; use a random secret (${generate})`,
    );
  }
  return value;
}

/**
 * Why a secret is too weak to guard anything (an example value, or fewer guesses than
 * MIN_ADMIN_TOKEN_GUESSES_LOG10 by zxcvbn's estimate), said after "the secret", or null:
 * the one rule for ADMIN_TOKEN, BUYER_AUTH's hs256 key and PAYMENT_WEBHOOK_SECRET.
 */
function secretWeakness(secret: string): string | null {
  const folded = secret.toLowerCase().replace(/[^a-z0-9]/g, '');
  const word = EXAMPLE_TOKEN_WORDS.find((w) => folded.includes(w));
  if (word) return `looks like an example value (it contains "${word}")`;
  const guesses = tokenGuessesLog10(secret);
  if (guesses < MIN_ADMIN_TOKEN_GUESSES_LOG10) {
    return `is too easy to guess (about 10^${Math.floor(guesses)} guesses by zxcvbn's estimate, at least 10^${MIN_ADMIN_TOKEN_GUESSES_LOG10} needed)`;
  }
  return null;
}

function paymentWebhookSecret(env: Env): string | null {
  const value = raw(env, 'PAYMENT_WEBHOOK_SECRET');
  if (value === undefined) return null;
  // Whoever knows it marks any order paid without paying: as strong as the HS256 key of
  // a buyer token (RFC 7518 3.2: at least the hash's 256 bits).
  if (value.length < 32) {
    throw new ConfigError(
      'PAYMENT_WEBHOOK_SECRET',
      'must be at least 32 characters (256 bits); use `openssl rand -base64 32`',
    );
  }
  const weak = secretWeakness(value);
  if (weak) throw new ConfigError('PAYMENT_WEBHOOK_SECRET', `${weak}; use \`openssl rand -base64 32\``);
  return value;
}

function keyPrefix(env: Env): string {
  // env[...] and not raw(): an explicit empty prefix is a mistake worth naming.
  const value = env.KEY_PREFIX;
  if (value === undefined) return CONFIG_DEFAULTS.keyPrefix;
  // Braces would break the per-product hash tag that keeps a product's keys in one slot.
  if (!/^[A-Za-z0-9:_.-]{1,64}$/.test(value)) {
    throw new ConfigError('KEY_PREFIX', `must be 1-64 characters of A-Z a-z 0-9 : _ . -, got "${value}"`);
  }
  return value;
}

/**
 * What a purchase path takes as "now" for the sale window, given Redis's clock read in
 * the deciding step: that clock (SALE_CLOCK=redis), or, for the lesson, this process's
 * own clock (SALE_CLOCK=app, shifted by FAULT_CLOCK_SKEW_MS).
 */
export function saleClock(config: AppConfig): ((redisNow: number) => number) | undefined {
  return config.saleClock === 'app' ? () => Date.now() + config.faultClockSkewMs : undefined;
}
