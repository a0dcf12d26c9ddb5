import { parseArgs } from 'node:util';
import { CONFIG_DEFAULTS } from '../../src/config/app-config';
import { REDIS_CONFIG } from '../../src/redis/redis.config';
import { checkRedisUrl } from '../../src/redis/redis-url';
import { ID_PATTERN, ID_RULE } from '../../src/sale/sale-limits';
import { ConfigError } from '../../src/settings/setting';
import { UsageError } from '../options';

export interface AuditOptions {
  /** One Redis, or any node of a Redis Cluster (found out by asking it). */
  readonly redis: string;
  /** PostgreSQL the orders are settled into: Redis against PostgreSQL is checked only with it. */
  readonly database?: string;
  /** The products named, or every product of the prefix (`--all`: null). */
  readonly products: readonly string[] | null;
  readonly keyPrefix: string;
  readonly json: boolean;
  /** Settle into PostgreSQL the orders of the log it lacks (needs --database). */
  readonly repair: boolean;
}

export const AUDIT_USAGE = `usage: npm run audit -- --redis URL [--database URL] (--product ID ... | --all)
                        [--key-prefix P] [--json] [--repair]

Judges a sale that ran for real, from its stores alone: each product's order log
(held never above the stock at any instant, every return once and after its order, no
buyer above the limit at any instant) and, with --database, PostgreSQL against Redis.
Read-only and bounded: every Redis read is a page (XRANGE, XPENDING and SSCAN with COUNT).

  --redis URL       redis:// or rediss:// URL of the Redis, or of any node of a Redis Cluster
  --database URL    postgres:// URL of the database orders are settled into
  --product ID      a product to audit (repeat it for several)
  --all             every product of the prefix (its products set, read with SSCAN)
  --key-prefix P    the apps' KEY_PREFIX  (${CONFIG_DEFAULTS.keyPrefix})
  --json            one JSON document on stdout instead of lines
  --repair          write into PostgreSQL the orders the log has and it lacks (needs --database),
                    through the settler's own idempotent writes; stock is never touched

Exit codes: 0 every check holds; 1 a finding; 2 bad flags, or a store that cannot be read;
3 nothing found, but a check could not be proven (docs/audit.md).
`;

export function parseAuditOptions(argv: string[]): AuditOptions {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        redis: { type: 'string' },
        database: { type: 'string' },
        product: { type: 'string', multiple: true },
        all: { type: 'boolean', default: false },
        'key-prefix': { type: 'string', default: CONFIG_DEFAULTS.keyPrefix },
        json: { type: 'boolean', default: false },
        repair: { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help) {
    process.stdout.write(AUDIT_USAGE);
    process.exit(0);
  }
  if (values.redis === undefined) throw new UsageError('--redis is required: the Redis (or a cluster node) to audit');
  const redis = fromConfig('--redis', () => checkRedisUrl('REDIS_URL', values.redis));
  const keyPrefix = fromConfig('--key-prefix', () =>
    REDIS_CONFIG.settings.keyPrefix.read(values['key-prefix'], { KEY_PREFIX: values['key-prefix'] }),
  );
  const named = values.product ?? [];
  if (values.all === named.length > 0) throw new UsageError('name the products: --product ID (repeatable) or --all');
  for (const id of named) if (!ID_PATTERN.test(id)) throw new UsageError(`--product ${ID_RULE}, got "${id}"`);
  if (values.database !== undefined && !/^postgres(ql)?:\/\//.test(values.database)) {
    throw new UsageError(`--database must be a postgres:// URL, got "${values.database}"`);
  }
  if (values.repair && values.database === undefined) {
    throw new UsageError('--repair writes into PostgreSQL: it needs --database');
  }
  return {
    redis,
    ...(values.database !== undefined && { database: values.database }),
    products: values.all ? null : [...new Set(named)],
    keyPrefix,
    json: values.json!,
    repair: values.repair!,
  };
}

/** A setting's own check, its error said about the flag that carries it. */
function fromConfig<T>(flag: string, read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(`${flag} ${err.detail}`);
    throw err;
  }
}
