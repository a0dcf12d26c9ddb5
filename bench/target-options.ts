/**
 * `--target`'s part of the command line (bench/options.ts parses the rest): the
 * deployment, its admin token and stores, what it decides itself (refused), and the
 * secrets it must be given for what the bench cannot know (its buyer tokens' key).
 */
import { CONFIG_DEFAULTS } from '../src/config/app-config';
import { UsageError } from './usage-error';

/** --target URL[,URL...]: the user's own deployment, its admin token, and where it keeps its data. */
export interface TargetDeployment {
  /** Its instances (or one load balancer): the buyers are spread over them. */
  readonly urls: string[];
  readonly adminToken: string;
  /** Its KEY_PREFIX (seckill: unless given). */
  readonly keyPrefix: string;
  /** Its PostgreSQL, when it settles: the row's orders are checked there too. */
  readonly database?: string;
  /** --auth hs256: its BUYER_AUTH=hs256:<secret> and the claims it checks, to mint the buyers' tokens with. */
  readonly buyerAuth?: TargetBuyerAuth;
}

export interface TargetBuyerAuth {
  readonly secret: string;
  readonly issuer: string;
  readonly audience: string;
}

/** What a row of the app's own makes of these; a deployment already running decides them itself. */
const NOT_WITH_TARGET = [
  'strategy',
  'workers',
  'telemetry',
  'settle',
  'catalog',
  'baseline',
  'sold-out-path',
  'cluster',
  'products',
  'retries',
  'watch',
  'buckets',
  'skew',
] as const;

/** The deployment's buyer-token settings, given only with --target --auth hs256. */
const BUYER_FLAGS = ['buyer-secret', 'buyer-issuer', 'buyer-audience'] as const;

/** A deployment's own settings: a run of the bench's own app has none of them, and would silently ignore them. */
const TARGET_FLAGS = ['admin-token', 'database', 'key-prefix'] as const;

interface TargetValues {
  target?: string;
  'admin-token'?: string;
  redis?: string;
  database?: string;
  'key-prefix'?: string;
  auth?: string;
  'buyer-secret'?: string;
  'buyer-issuer'?: string;
  'buyer-audience'?: string;
  queue?: string;
}

/** The deployment --target names, or a UsageError saying what is missing or cannot go with it. */
export function targetOf(argv: string[], values: TargetValues): TargetDeployment {
  // Given, not defaulted: parseArgs fills defaults in, so the command line itself is read.
  const given = NOT_WITH_TARGET.filter((name) => argv.some((a) => a === `--${name}` || a.startsWith(`--${name}=`)));
  if (given.length > 0) {
    throw new UsageError(
      `--target runs against a deployment as it is: not with ${given.map((g) => `--${g}`).join(', ')}`,
    );
  }
  const urls = values.target!.split(',').map((u) => u.trim().replace(/\/+$/, ''));
  for (const url of urls) {
    if (!/^https?:\/\/[^/]+$/.test(url)) throw new UsageError(`--target takes http(s)://host:port URLs, got "${url}"`);
  }
  if (!values['admin-token']) throw new UsageError("--target needs --admin-token (the deployment's ADMIN_TOKEN)");
  if (!values.redis)
    throw new UsageError('--target needs --redis (the Redis the deployment uses): the verdict is read there');
  if (values.database !== undefined && !/^postgres(ql)?:\/\//.test(values.database)) {
    throw new UsageError(`--database must be a postgres:// URL, got "${values.database}"`);
  }
  // A deployment is one row: a second --queue value would be a row never run, dropped without a word.
  if (values.queue !== undefined && new Set(values.queue.split(',').map((q) => q.trim())).size > 1) {
    throw new UsageError(
      `--queue with --target: the run is one row, on one waiting room; give off or RATE, not "${values.queue}"`,
    );
  }
  const buyerAuth = buyerAuthOf(values);
  return {
    urls,
    adminToken: values['admin-token'],
    keyPrefix: values['key-prefix'] ?? CONFIG_DEFAULTS.keyPrefix,
    ...(values.database !== undefined && { database: values.database }),
    ...(buyerAuth && { buyerAuth }),
  };
}

/**
 * --auth against a deployment: its tokens are minted with its own key, which only the
 * user can give. An HS256 secret can be (BUYER_AUTH=hs256:<secret>); a public key cannot
 * mint anything, and its private half is the identity provider's, not the deployment's.
 */
function buyerAuthOf(values: TargetValues): TargetBuyerAuth | undefined {
  const auth = [...new Set(values.auth!.split(',').map((a) => a.trim()))];
  if (auth.length > 1) {
    throw new UsageError(
      `--auth with --target: the deployment runs one BUYER_AUTH; give off or hs256, not "${values.auth}"`,
    );
  }
  if (auth[0] === 'es256') {
    throw new UsageError(
      "--auth es256 with --target: minting tokens the deployment's public key verifies needs its identity provider's private key; a deployment with BUYER_AUTH=hs256:<secret> takes --auth hs256 --buyer-secret",
    );
  }
  if (auth[0] !== 'hs256') {
    refuseGiven(BUYER_FLAGS, values, 'go with --target and --auth hs256 only');
    return undefined;
  }
  const missing = BUYER_FLAGS.filter((flag) => !values[flag]);
  if (missing.length > 0) {
    throw new UsageError(
      `--auth hs256 with --target mints the buyers' tokens as the deployment checks them: it needs ${missing.map((m) => `--${m}`).join(', ')} (BUYER_AUTH=hs256:<secret>, BUYER_AUTH_ISSUER, BUYER_AUTH_AUDIENCE)`,
    );
  }
  return { secret: values['buyer-secret']!, issuer: values['buyer-issuer']!, audience: values['buyer-audience']! };
}

/**
 * Without --target: a deployment's admin token, stores and buyer secret mean nothing to
 * a run of the bench's own app, and are refused rather than ignored.
 */
export function checkNoTargetFlags(values: Omit<TargetValues, 'target' | 'redis' | 'auth' | 'queue'>): void {
  refuseGiven(TARGET_FLAGS, values, 'go with --target only');
  refuseGiven(BUYER_FLAGS, values, 'go with --target and --auth hs256 only');
}

function refuseGiven(flags: readonly (keyof TargetValues)[], values: TargetValues, why: string): void {
  const given = flags.filter((flag) => values[flag] !== undefined);
  if (given.length > 0) throw new UsageError(`${given.map((g) => `--${g}`).join(', ')} ${why}`);
}
