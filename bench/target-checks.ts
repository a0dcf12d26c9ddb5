/**
 * What `--target` checks of a deployment before any load (bench/target.ts runs them):
 * each finding is a TargetRefusal, one line and exit code 2. Every call has a deadline,
 * so a deployment that accepts and never answers is refused, not waited for.
 */
import { Redis } from 'ioredis';
import { Client } from 'pg';
import { JsonResponse, request } from '../harness/http';
import type { TargetDeployment } from './options';
import { redactUrls } from './redact';

/** A deployment the bench will not load, in one line: exit code 2, before any buyer is sent. */
export class TargetRefusal extends Error {}

/** Each check's deadline: a deployment's probe, a store's connect and query, ms. */
export const CHECK_TIMEOUT_MS = 5_000;

/** Per-IP rate-limit probe: reads sent at most (one load generator's address), and at once. */
const RATE_PROBE_READS = 1_000;
const RATE_PROBE_PARALLEL = 32;

/** What GET /health says that the run uses. */
export interface TargetHealth {
  readonly strategy: string;
  readonly unsafe?: boolean;
  /** With DATABASE_URL only: settlement into its PostgreSQL. */
  readonly settlement?: { readonly state: string; readonly reason?: string };
}

/** A call to the deployment with CHECK_TIMEOUT_MS: one that does not answer in time is a refusal. */
export async function ask(
  url: string,
  method: string,
  path: string,
  options: Parameters<typeof request>[3] = {},
): Promise<JsonResponse> {
  try {
    return await request(url, method, path, { ...options, timeoutMs: CHECK_TIMEOUT_MS });
  } catch (err) {
    throw new TargetRefusal(`--target ${url}: ${method} ${path} ${failure(err)}`);
  }
}

function failure(err: unknown): string {
  const e = err as Error & { cause?: Error };
  if (e.name === 'TimeoutError') return `did not answer within ${CHECK_TIMEOUT_MS / 1000} s`;
  return `is unreachable: ${e.cause?.message ?? e.message}`;
}

/**
 * GET /health on every URL: each must answer 200, and all must run one strategy (the
 * row is about one). Their settlement is checked against --database (checkSettlement).
 */
export async function probe(urls: readonly string[]): Promise<TargetHealth> {
  const seen = await Promise.all(
    urls.map(async (url) => {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(CHECK_TIMEOUT_MS) }).catch(
        (err: Error) => {
          throw new TargetRefusal(`--target ${url} ${failure(err)}`);
        },
      );
      // A load balancer with no instance behind it answers too (nginx: a 502 page in HTML).
      const body = (await res.json().catch(() => undefined)) as (TargetHealth & { problems?: unknown }) | undefined;
      if (typeof body?.strategy !== 'string') {
        throw new TargetRefusal(
          `--target ${url}: GET /health answered ${res.status} without a strategy: not this app, or none behind it`,
        );
      }
      // 503: it would refuse or lose a write now; a sale on it measures its trouble, not its speed.
      if (res.status !== 200) {
        throw new TargetRefusal(
          `--target ${url}: GET /health answered ${res.status}, not ready to sell (${JSON.stringify(body.problems ?? [])})`,
        );
      }
      return body;
    }),
  );
  const strategies = [...new Set(seen.map((h) => h.strategy))];
  if (strategies.length > 1)
    throw new TargetRefusal(`--target: the instances run different strategies (${strategies.join(', ')})`);
  return seen.find((h) => h.settlement) ?? seen[0];
}

/**
 * --redis answers, with the login it gives: an unreachable server or a missing password
 * is said in one line here, before the run's own clients (which retry, and report
 * through error events) connect to it.
 */
export async function checkRedis(url: string): Promise<void> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: CHECK_TIMEOUT_MS,
    commandTimeout: CHECK_TIMEOUT_MS,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    // PING itself says NOAUTH; a ready check would close the connection and say only that.
    enableReadyCheck: false,
  });
  // Its failures are the refusal below (the first says why: "connect ECONNREFUSED ...");
  // unheard, ioredis would print them as an unhandled error event.
  let first: Error | undefined;
  redis.on('error', (err: Error) => (first ??= err));
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    throw new TargetRefusal(`--redis ${redactUrls(url)}: ${(first ?? (err as Error)).message}`);
  } finally {
    redis.disconnect();
  }
}

/**
 * --database is read after the sale (its orders): it must answer now, with the table
 * the deployment settles into, so a wrong one is not found only once the load is done.
 */
export async function checkDatabase(url: string): Promise<void> {
  const client = new Client({
    connectionString: url,
    connectionTimeoutMillis: CHECK_TIMEOUT_MS,
    query_timeout: CHECK_TIMEOUT_MS,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT order_id FROM orders LIMIT 1');
  } catch (err) {
    throw new TargetRefusal(`--database ${redactUrls(url)}: ${(err as Error).message}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * A row is judged from PostgreSQL only if the deployment settles there: --database with
 * a deployment that settles nowhere (no settlement in /health), or not now (failing),
 * would wait out the settle deadline and fail a sale that was fine. Returns whether
 * the deployment settles (its orders are left in its PostgreSQL either way).
 */
export function checkSettlement(health: TargetHealth, target: TargetDeployment): boolean {
  const { settlement } = health;
  if (target.database === undefined) return settlement !== undefined;
  if (!settlement) {
    throw new TargetRefusal(
      '--database: the deployment settles into no PostgreSQL (its /health has no settlement: no DATABASE_URL); drop --database',
    );
  }
  if (settlement.state !== 'settling') {
    throw new TargetRefusal(
      `--database: the deployment does not settle now (its /health: settlement ${settlement.state}: ${settlement.reason ?? 'no reason given'})`,
    );
  }
  return true;
}

/**
 * A per-IP rate limit (RATE_LIMIT_PER_IP) counts every buyer of the bench as one client,
 * its one address: the load would be mostly 429s and the sale judged undersold. The
 * buyer's own order read (a door route, rate-limited as a purchase is, writing nothing)
 * is sent up to the run's request count (capped), spread over the URLs; a 429 is a refusal.
 */
export async function checkRateLimit(urls: readonly string[], id: string, requests: number): Promise<void> {
  const reads = Math.min(requests, RATE_PROBE_READS);
  let sent = 0;
  let limited: { url: string; policy: string } | undefined;
  const reader = async () => {
    while (!limited && sent < reads) {
      const url = urls[sent++ % urls.length];
      const res = await ask(url, 'GET', `/api/orders/${id}.00000000-0000-4000-8000-000000000000`);
      if (res.status === 429 && res.body?.code === 'RATE_LIMITED') {
        limited = { url, policy: res.headers.get('ratelimit-policy') ?? '' };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(RATE_PROBE_PARALLEL, reads) }, reader));
  if (limited) {
    throw new TargetRefusal(
      `--target ${limited.url} rate-limits each client address (429 RATE_LIMITED, RateLimit-Policy ${limited.policy}): one load generator is one address, so the bench cannot measure this deployment's sale; run it against instances without RATE_LIMIT_PER_IP`,
    );
  }
}

/**
 * Every URL must sell the run's product: an instance of another deployment in the list
 * (another KEY_PREFIX or Redis) answers 404 UNKNOWN_PRODUCT to its share of the buyers.
 */
export async function checkEveryUrl(urls: readonly string[], id: string): Promise<void> {
  for (const url of urls) {
    const res = await ask(url, 'GET', `/api/products/${id}`);
    if (res.status === 404) {
      throw new TargetRefusal(
        `--target ${url} does not sell the run's product ${id} (GET /api/products/${id} answered 404 ${res.body?.code}): an instance of another deployment (another KEY_PREFIX or Redis) than ${urls[0]}`,
      );
    }
    if (res.status !== 200) {
      throw new TargetRefusal(
        `--target ${url}: GET /api/products/${id} answered ${res.status} ${JSON.stringify(res.body)}`,
      );
    }
  }
}
