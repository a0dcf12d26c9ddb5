/**
 * `npm run bench -- --target URL[,URL...] --admin-token T --redis URL [--database URL]`:
 * the same measured sale against a deployment already running, judged from its Redis
 * (and PostgreSQL) with the same verdict and history checker. Nothing is started, and
 * nothing is deleted: the run sells only products of its own (bench-<run id>), and says
 * what it leaves behind and how to remove it. Every refusal comes before any load.
 */
import { Redis } from 'ioredis';
import { relative } from 'node:path';
import { LockStrategyName, UNSAFE_STRATEGIES } from '../src/config/app-config';
import { KeyLayout } from '../src/redis/key-layout';
import { adminPayment } from './afterlife';
import { mintDeploymentTokens, tokenCount } from './buyer-tokens';
import { Measured, measuredSale, toRow } from './measured-sale';
import type { BenchOptions, TargetDeployment } from './options';
import { redactUrls } from './redact';
import { formatReport, rowLabel } from './report';
import { withRatios, writeResults } from './results';
import { prepare, requests, RowApp, Run, warmUp } from './rows';
import type { RedisNode } from './run-redis';
import {
  ask,
  checkDatabase,
  checkEveryUrl,
  checkRateLimit,
  checkRedis,
  checkSettlement,
  probe,
  TargetHealth,
  TargetRefusal,
} from './target-checks';

/** Keys the refusal's prefix search reads per SCAN call, and in all per node: bounded, however large the deployment's keyspace. */
const SCAN_COUNT = 1000;
const SCAN_MAX_KEYS = 1_000_000;

export async function benchTarget(options: BenchOptions): Promise<number> {
  const target = options.target!;
  // Every check that needs no product of its own comes first: nothing is written before them.
  const health = await probe(target.urls);
  await checkRedis(options.redis!);
  const settles = checkSettlement(health, target);
  if (target.database !== undefined) await checkDatabase(target.database);
  const run = await prepare(options);
  const id = `bench-${run.runId}`;
  const keys = new KeyLayout(target.keyPrefix);
  await checkRateLimit(target.urls, id, requests(options));
  // Minted before the warm-up and the pass (the bench's CPU), with the deployment's own key.
  const tokens = target.buyerAuth && (await mintDeploymentTokens(target.buyerAuth, tokenCount(options)));
  await checkBuyerAuth(target, id, tokens);
  await startOwnSale(target, id, options);
  const products: string[] = [];
  const retired = new Set<string>();
  try {
    return await sellOwnProduct(run, options, { health, settles, id, keys, tokens, products, retired });
  } finally {
    // Once its product exists, whatever happens next: the user learns what is theirs to remove.
    run.log(leftBehind(target, [...new Set([...products, id])], retired, settles));
  }
}

interface OwnSale {
  readonly health: TargetHealth;
  readonly settles: boolean;
  readonly id: string;
  readonly keys: KeyLayout;
  readonly tokens?: ReadonlyMap<string, string>;
  /** Each sale adds its products here (the warm-up's, then each attempt's). */
  readonly products: string[];
  /** Those a DELETE removed again (a refusal after the PUT). */
  readonly retired: Set<string>;
}

async function sellOwnProduct(run: Run, options: BenchOptions, sale: OwnSale): Promise<number> {
  const target = options.target!;
  const { health, settles, id, keys, tokens, products } = sale;
  await checkSeen(run, target, keys, sale);
  // The product is the run's on every URL, or the list names another deployment: retired, refused.
  await checkEveryUrl(target.urls, id).catch(async (err: unknown) => {
    await retire(target, id, sale.retired);
    throw err;
  });
  const strategy = health.strategy as LockStrategyName;
  const unsafe = health.unsafe === true || (UNSAFE_STRATEGIES as readonly string[]).includes(strategy);
  const queue = options.queue[0];
  // A deployment that settles and was given no --database: not "settle-off", only not checked.
  const setUp = rowLabel({
    strategy,
    workers: 1,
    telemetry: true,
    settle: settles,
    ...(target.buyerAuth && { auth: 'hs256' }),
    ...(queue > 0 && { queue: { admitPerSecond: queue } }),
  });
  const label = `${setUp} @ ${target.urls.length} URL${target.urls.length > 1 ? 's' : ''}`;
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
  if (settles && !target.database) {
    run.log(`${label}: settlement not checked (no --database): the deployment settles into its PostgreSQL`);
  }
  await warmUp(run, t);
  const measured = await measuredSale(run, t);
  const rows = withRatios([{ ...toRow(run, t, unknownProducts(measured), 0), settle: settles }]);
  const { html } = await writeResults(run, rows);
  const { text, failed } = formatReport(rows);
  process.stdout.write(`${text}\n`);
  run.log(`results: ${relative(process.cwd(), options.out)}, charts: ${relative(process.cwd(), html)}`);
  // The app's processes are the deployment's, on whatever machines: not the bench's to read.
  run.log(`the deployment runs ${strategy} (its /health); the app's CPU was not measured (not the bench's process)`);
  // Meters are a Redis's own counters: whoever else uses it shares them.
  run.log(`the Redis figures are the whole server's during the pass: other traffic on it is counted too`);
  return failed ? 1 : 0;
}

/**
 * A buyer answered 404 UNKNOWN_PRODUCT for the run's own product was refused for no
 * true reason (invariant 2): an instance that does not sell it took its share of the load.
 */
export function unknownProducts(measured: Measured): Measured {
  const unknown = measured.load.codes.UNKNOWN_PRODUCT ?? 0;
  if (unknown === 0) return measured;
  const { verdict } = measured;
  return {
    ...measured,
    verdict: {
      ...verdict,
      invariants: { ...verdict.invariants, noUndersell: false },
      problems: [
        ...verdict.problems,
        `${unknown} buyers answered 404 UNKNOWN_PRODUCT for the run's own product: an instance that does not sell it`,
      ],
    },
  };
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
    ask(url, 'GET', `/api/orders/${id}.00000000-0000-4000-8000-000000000000`, { ...(token && { token }) });
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
  const res = await ask(target.urls[0], 'PUT', `/api/products/${id}`, {
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
async function checkSeen(run: Run, target: TargetDeployment, keys: KeyLayout, sale: OwnSale): Promise<void> {
  const { id } = sale;
  if (Object.keys(await run.client.hgetall(keys.product(id).meta)).length > 0) return;
  const other = await findMeta(run.redis.nodes, `*{p:${id}}:meta`);
  await retire(target, id, sale.retired);
  if (other !== null) {
    const prefix = other.slice(0, other.indexOf(`{p:${id}}`));
    throw new TargetRefusal(`--key-prefix: the deployment writes under "${prefix}", not "${target.keyPrefix}"`);
  }
  throw new TargetRefusal(
    `--redis ${redactUrls(run.options.redis!)} is not the deployment's Redis: its product ${id} did not appear there`,
  );
}

/** DELETEs the run's product; retired only if the deployment says it is gone (else it is left behind, and said so). */
async function retire(target: TargetDeployment, id: string, retired: Set<string>): Promise<void> {
  const res = await ask(target.urls[0], 'DELETE', `/api/products/${id}?discardOrders=true`, {
    token: target.adminToken,
  }).catch(() => undefined);
  if (res && res.status >= 200 && res.status < 300) retired.add(id);
}

async function findMeta(nodes: readonly RedisNode[], pattern: string): Promise<string | null> {
  for (const node of nodes) {
    const redis = new Redis(node.url, { lazyConnect: true });
    try {
      await redis.connect();
      let cursor = '0';
      // A stranger's Redis may hold any number of keys: past SCAN_MAX_KEYS the product is "not found".
      for (let calls = 0; calls < SCAN_MAX_KEYS / SCAN_COUNT; calls++) {
        const [next, found] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', SCAN_COUNT);
        if (found.length > 0) return found[0];
        cursor = next;
        if (cursor === '0') break;
      }
    } finally {
      redis.disconnect();
    }
  }
  return null;
}

/** What the run leaves in the deployment, and the admin call that removes each product. */
function leftBehind(
  target: TargetDeployment,
  products: readonly string[],
  retired: ReadonlySet<string>,
  settles: boolean,
) {
  const kept = products.filter((p) => !retired.has(p));
  // A DELETE keeps a product's fencing counter by design: a token is never handed out twice.
  const fences = `${[...retired].map((p) => `${target.keyPrefix}{p:${p}}:fence`).join(', ')} (a DELETE keeps a product's fencing counter)`;
  if (kept.length === 0) return `left behind: only ${fences}`;
  const orders = settles ? ', and their orders in PostgreSQL (a DELETE keeps them)' : '';
  const base = redactUrls(target.urls[0]);
  return `left behind: the products ${kept.join(', ')}${orders}${retired.size > 0 ? `; ${fences}` : ''}; remove each with curl -X DELETE -H 'Authorization: Bearer <admin token>' '${base}/api/products/<id>?discardOrders=true' (docs/api.md "Retiring a product")`;
}
