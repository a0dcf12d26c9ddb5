/**
 * `npm run settle`: a settler alone, beside (or instead of) the apps' own: the same
 * Settler as every app instance runs, one more consumer of the same group. Reads the
 * app's configuration (REDIS_URL or REDIS_CLUSTER_NODES, KEY_PREFIX, DATABASE_URL,
 * SETTLE_*); stops on SIGINT/SIGTERM after its batch in hand.
 */
import { Logger } from '@nestjs/common';
import { loadConfig } from './config/app-config';
import { readEnvFile } from './config/env-file';
import { FaultStop } from './orders/fault-stop';
import { closeRedisClient, createAppRedisClient, whenReady } from './redis/create-client';
import { KeyLayout } from './redis/key-layout';
import { migrate } from './settlement/migrations';
import { createPool } from './settlement/postgres';
import { Settler } from './settlement/settler';

/** How long `npm run settle` waits for its Redis client before it gives up. */
const REDIS_READY_WAIT_MS = 10_000;

async function main(): Promise<void> {
  readEnvFile();
  const config = loadConfig(process.env);
  if (!config.databaseUrl) throw new Error('DATABASE_URL is required: the PostgreSQL to settle into');
  const logger = new Logger('Settle');
  const redis = createAppRedisClient(config);
  const pool = createPool(config);
  const settler = new Settler(
    redis,
    pool,
    new KeyLayout(config.keyPrefix),
    config,
    new FaultStop(config.faultStopAt),
    (line) => logger.warn(line),
  );
  // The client ready (a cluster's slot map read), then the prefix marked settled before
  // PostgreSQL is asked anything: the apps' resets keep the order logs' group from now on,
  // even if PostgreSQL is away and this settler stops here.
  if (!(await whenReady(redis, REDIS_READY_WAIT_MS)))
    throw new Error(`Redis is not ready after ${REDIS_READY_WAIT_MS} ms`);
  await settler.mark();
  const applied = await migrate(pool);
  logger.log(
    `${applied.length > 0 ? `schema migrated (${applied.join(', ')})` : 'schema up to date'}; settling ${config.keyPrefix}* as consumer ${settler.consumer}`,
  );
  settler.start();
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      void (async () => {
        await settler.stop();
        await Promise.allSettled([pool.end(), closeRedisClient(redis)]);
        logger.log(`stopped: ${settler.status().settled} entries settled`);
        process.exit(0);
      })();
    });
  }
}

main().catch((err: Error) => {
  for (const line of err.message.split('\n')) process.stderr.write(`settle: ${line}\n`);
  process.exit(1);
});
