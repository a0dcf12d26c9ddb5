import { ConfigError, ConfigOf, flag, int, section, setting } from '../settings/setting';

export const SETTLEMENT_CONFIG = section('settlement', {
  databaseUrl: setting(
    'DATABASE_URL',
    'set by `npm start` (a private PostgreSQL in `.data/postgres/`; as root in a checkout the `postgres` user cannot reach, in `/var/tmp/seckill-postgres-<hash>/`, said in the log)',
    '`postgres://` URL of the PostgreSQL every order is settled into ([settlement.md](settlement.md)); unset: no settlement, orders stay in Redis only (`SETTLE=off npm start` starts none)',
    (value): string | null => {
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
    },
  ),
  pgStatementTimeoutMs: int(
    'PG_STATEMENT_TIMEOUT_MS',
    5_000,
    [100, 600_000],
    'the longest a PostgreSQL statement (and a connect) may take before the settler gives up on it and tries again',
  ),
  settleBatch: int('SETTLE_BATCH', 1_000, [1, 10_000], 'stream entries settled per PostgreSQL transaction, at most'),
  settleTrim: flag(
    'SETTLE_TRIM',
    false,
    "`1`: after each batch, trim the product's order stream of the entries every consumer group has settled (acknowledged), never one still pending or undelivered in any group. Off by default: the bench and the fault suite read the whole order log to judge a sale",
  ),
  settleClaimIdleMs: int(
    'SETTLE_CLAIM_IDLE_MS',
    10_000,
    [100, 3_600_000],
    'how long an entry may stay delivered and unacknowledged (its settler died) before another settler claims it',
  ),
});
export type SettlementConfig = ConfigOf<typeof SETTLEMENT_CONFIG>;
