import { Pool } from 'pg';
import type { SettlementConfig } from './settlement.config';
import { PASS_CONCURRENCY } from './settler';

/**
 * Connections per instance: the settler's, up to PASS_CONCURRENCY at a time (settler.ts),
 * each of which may wait on a lock for a whole statement timeout, and three more, as before
 * the settler took several: /health's probe (1 s) and the reads of the orders listing.
 */
const POOL_SIZE = PASS_CONCURRENCY + 3;

/**
 * The PostgreSQL pool: statements time out (PG_STATEMENT_TIMEOUT_MS), so a paused or
 * overloaded server is given up on and tried again, never waited on forever; so does a
 * connect. Errors of idle clients (the server restarted) are the pool's to drop, not
 * the process's to die of.
 */
export function createPool(config: Pick<SettlementConfig, 'databaseUrl' | 'pgStatementTimeoutMs'>): Pool {
  if (!config.databaseUrl) throw new Error('DATABASE_URL is not set');
  const pool = new Pool({
    connectionString: config.databaseUrl,
    max: POOL_SIZE,
    connectionTimeoutMillis: config.pgStatementTimeoutMs,
    // Server side, and client side for a server that does not answer at all (SIGSTOP).
    statement_timeout: config.pgStatementTimeoutMs,
    query_timeout: config.pgStatementTimeoutMs + 1_000,
    idleTimeoutMillis: 30_000,
    application_name: 'seckill',
  });
  // A server that goes away makes every connection emit 'error': an idle one's reaches
  // the pool's listener, but one checked out (the settler's, mid-batch) emits on the
  // client itself, and an 'error' nobody listens to would end the process, and the
  // sale with it. The failed query rejects too: that is where the settler hears it.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}
