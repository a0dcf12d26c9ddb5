/**
 * `npm run bench -- --target URL[,URL...] --admin-token T --redis URL [--database URL]`:
 * the same measured sale against a deployment already running, judged from its Redis
 * (and PostgreSQL) with the same verdict and history checker. Nothing is started, and
 * nothing is deleted: the run sells only products of its own (bench-<run id>), and says
 * what it leaves behind and how to remove it. Every refusal comes before any load.
 */
import { Redis } from 'ioredis';
import { relative } from 'node:path';
import { request } from '../harness/http';
import { LockStrategyName, UNSAFE_STRATEGIES } from '../src/config/app-config';
import { KeyLayout } from '../src/redis/key-layout';
import { adminPayment } from './afterlife';
import { mintDeploymentTokens, tokenCount } from './buyer-tokens';
import { measuredSale, toRow } from './measured-sale';
import type { BenchOptions, TargetDeployment } from './options';
import { formatReport, rowLabel } from './report';
import { withRatios, writeResults } from './results';
import { prepare, RowApp, Run, warmUp } from './rows';
import type { RedisNode } from './run-redis';

/** A deployment the bench will not load, in one line: exit code 2, before any buyer is sent. */
export class TargetRefusal extends Error {}

/** Keys the refusal's prefix search reads per SCAN call: bounded, however large the deployment's keyspace. */
const SCAN_COUNT = 1000;

export async function benchTarget(options: BenchOptions): Promise<number> {
  const target = options.target!;
  const health = await probe(target.urls);
  const run = await prepare(options);
  const id = `bench-${run.runId}`;
  const keys = new KeyLayout(target.keyPrefix);
  // Minted before the warm-up and the pass (the bench's CPU), with the deployment's own key.
  const tokens = target.buyerAuth && (await mintDeploymentTokens(target.buyerAuth, tokenCount(options)));
  await checkBuyerAuth(target, id, tokens);
  await startOwnSale(target, id, options);
  await checkSeen(run, target, keys, id);
  const strategy = health.strategy as LockStrategyName;
  const unsafe = health.unsafe === true || (UNSAFE_STRATEGIES as readonly string[]).includes(strategy);
  const settle = target.database !== undefined;
  const queue = options.queue[0];
  const setUp = rowLabel({
    strategy,
    workers: 1,
    telemetry: true,
    settle,
    ...(target.buyerAuth && { auth: 'hs256' }),
    ...(queue > 0 && { queue: { admitPerSecond: queue } }),
  });
  const label = `${setUp} @ ${target.urls.length} URL${target.urls.length > 1 ? 's' : ''}`;
  const products: string[] = [];
  const app = { url: target.urls[0], pid: -1, tail: () => '', stop: async () => 0 };
  const t: RowApp = {
    target: strategy,
    workers: 1,
    telemetry: true,
    auth: target.buyerAuth ? 'hs256' : 'off',
    ...(tokens && { tokens }),
    // Paid as an operator pays by hand: the deployment's webhook secret is not the bench's.
    payer: adminPayment(target.adminToken),
    queue,
    label,
    unsafe,
    app,
    token: target.adminToken,
    keys,
    // The deployment is not the bench's to restart: a control's next sale runs on the same instances.
    launch: async () => app,
    products,
    urls: target.urls,
    measuredProducts: (attempt) => [attempt === 1 ? id : `${id}-${attempt}`],
    ...(target.database && { databaseUrl: target.database }),
  };
  run.log(`${label}: the deployment at ${target.urls.join(', ')} runs ${strategy}${unsafe ? ' (UNSAFE)' : ''}`);
  // Each sale adds its products to t.products (the warm-up's, then each attempt's).
  await warmUp(run, t);
  const measured = await measuredSale(run, t);
  const rows = withRatios([toRow(run, t, measured, 0)]);
  const { html } = await writeResults(run, rows);
  const { text, failed } = formatReport(rows);
  process.stdout.write(`${text}\n`);
  run.log(`results: ${relative(process.cwd(), options.out)}, charts: ${relative(process.cwd(), html)}`);
  // The app's processes are the deployment's, on whatever machines: not the bench's to read.
  run.log(`the deployment runs ${strategy} (its /health); the app's CPU was not measured (not the bench's process)`);
  run.log(leftBehind(target, products));
  return failed ? 1 : 0;
}

/** GET /health on every URL: each must answer, and all must run one strategy (the row is about one). */
async function probe(urls: readonly string[]): Promise<{ strategy: string; unsafe?: boolean }> {
  const seen = await Promise.all(
    urls.map(async (url) => {
      const res = await fetch(`${url}/health`).catch((err: Error) => {
        throw new TargetRefusal(
          `--target ${url} is unreachable: ${(err.cause as Error | undefined)?.message ?? err.message}`,
        );
      });
      // A load balancer with no instance behind it answers too (nginx: a 502 page in HTML).
      const body = (await res.json().catch(() => undefined)) as { strategy?: unknown; unsafe?: boolean } | undefined;
      if (typeof body?.strategy !== 'string') {
        throw new TargetRefusal(
          `--target ${url}: GET /health answered ${res.status} without a strategy: not this app, or none behind it`,
        );
      }
      return body as { strategy: string; unsafe?: boolean };
    }),
  );
  const strategies = [...new Set(seen.map((h) => h.strategy))];
  if (strategies.length > 1)
    throw new TargetRefusal(`--target: the instances run different strategies (${strategies.join(', ')})`);
  return seen[0];
}

/**
 * Whether the deployment checks buyer tokens, and takes the bench's: its buyer's own
 * order read (a door route) without a token, then with one. Under BUYER_AUTH the first
 * is 401 BUYER_TOKEN_REQUIRED; a token of the right key reaches the route (404: no such
 * order), any other is 401 again. Nothing is bought or written.
 */
async function checkBuyerAuth(target: TargetDeployment, id: string, tokens?: ReadonlyMap<string, string>) {
  const url = target.urls[0];
  const read = (token?: string) =>
    request(url, 'GET', `/api/orders/${id}.00000000-0000-4000-8000-000000000000`, { ...(token && { token }) });
  const bare = await read();
  const required = bare.status === 401 && bare.body?.code === 'BUYER_TOKEN_REQUIRED';
  if (required && !tokens) {
    throw new TargetRefusal(
      '--auth: the deployment checks buyer tokens (BUYER_AUTH): give --auth hs256 with its --buyer-secret, --buyer-issuer and --buyer-audience',
    );
  }
  if (!tokens) return;
  if (!required) throw new TargetRefusal(`--auth hs256: ${url} checks no buyer tokens (no BUYER_AUTH): drop --auth`);
  const signed = await read(tokens.values().next().value);
  if (signed.status === 401) {
    throw new TargetRefusal(
      `--buyer-secret, --buyer-issuer, --buyer-audience: ${url} refused a token minted with them (${signed.body?.code}: ${signed.body?.message})`,
    );
  }
}

/** The run's product, PUT through the admin API: a wrong token is refused here, before any load. */
async function startOwnSale(target: TargetDeployment, id: string, options: BenchOptions): Promise<void> {
  const res = await request(target.urls[0], 'PUT', `/api/products/${id}`, {
    json: { stock: options.stock, perUserLimit: options.quantity, discardOrders: true },
    token: target.adminToken,
  });
  if (res.status === 401) throw new TargetRefusal(`--admin-token: ${target.urls[0]} refused it (401 UNAUTHORIZED)`);
  if (res.status !== 200) {
    throw new TargetRefusal(`--target: PUT /api/products/${id} answered ${res.status} ${JSON.stringify(res.body)}`);
  }
}

/**
 * The verdict is read from --redis under --key-prefix: the product just PUT must be there.
 * If it is not, the product is found under another prefix (bounded SCANs for its hash
 * tag, on every master of a cluster) or nowhere; either way it is retired through the
 * API, being the run's own.
 */
async function checkSeen(run: Run, target: TargetDeployment, keys: KeyLayout, id: string): Promise<void> {
  if (Object.keys(await run.client.hgetall(keys.product(id).meta)).length > 0) return;
  const other = await findMeta(run.redis.nodes, `*{p:${id}}:meta`);
  await request(target.urls[0], 'DELETE', `/api/products/${id}?discardOrders=true`, { token: target.adminToken });
  if (other !== null) {
    const prefix = other.slice(0, other.indexOf(`{p:${id}}`));
    throw new TargetRefusal(`--key-prefix: the deployment writes under "${prefix}", not "${target.keyPrefix}"`);
  }
  throw new TargetRefusal(
    `--redis ${run.options.redis} is not the deployment's Redis: its product ${id} did not appear there`,
  );
}

async function findMeta(nodes: readonly RedisNode[], pattern: string): Promise<string | null> {
  for (const node of nodes) {
    const redis = new Redis(node.url, { lazyConnect: true });
    try {
      await redis.connect();
      let cursor = '0';
      do {
        const [next, found] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT);
        if (found.length > 0) return found[0];
        cursor = next;
      } while (cursor !== '0');
    } finally {
      redis.disconnect();
    }
  }
  return null;
}

/** What the run leaves in the deployment, and the admin call that removes each product. */
function leftBehind(target: TargetDeployment, products: readonly string[]): string {
  const base = target.urls[0];
  const orders = target.database ? ', and their orders in PostgreSQL (a DELETE keeps them)' : '';
  return `left behind: the products ${products.join(', ')}${orders}; remove each with curl -X DELETE -H 'Authorization: Bearer <admin token>' '${base}/api/products/<id>?discardOrders=true' (docs/api.md "Retiring a product")`;
}
