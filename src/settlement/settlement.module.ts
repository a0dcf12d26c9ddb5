import {
  BeforeApplicationShutdown,
  DynamicModule,
  Inject,
  Injectable,
  Logger,
  Module,
  OnApplicationBootstrap,
  OnApplicationShutdown,
} from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Pool } from 'pg';
import { SettlementConfig } from './settlement.config';
import { FaultStop } from '../orders/fault-stop';
import { type RedisClient, whenReady } from '../redis/create-client';
import { KeyLayout } from '../redis/key-layout';
import { Metrics } from '../telemetry/metrics';
import { CREATED, PurchaseTelemetry } from '../telemetry/purchase-telemetry';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { migrate } from './migrations';
import { createPool } from './postgres';
import { SettlementLag } from './settlement-lag';
import { PG_POOL } from './settlement.constants';
import { Settler } from './settler';

/** How long the settler's first pass waits for the Redis client to be ready. */
const REDIS_READY_WAIT_MS = 10_000;

/**
 * The instance's settler: migrations at start-up, then the consumer loop, stopped as
 * shutdown begins (its batch in hand settled or left pending), the pool closed last.
 */
@Injectable()
class SettlerLifecycle implements OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger('Settlement');

  constructor(
    private readonly settler: Settler,
    @Inject(PG_POOL) private readonly pool: Pool,
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    lag: SettlementLag,
    metrics: Metrics,
    telemetry: PurchaseTelemetry,
  ) {
    metrics.readSettlement(
      async () => {
        const products = await lag.lag();
        return {
          unsettled: products.reduce((sum, p) => sum + p.unsettled, 0),
          oldestMs: products.reduce((max, p) => Math.max(max, p.oldestMs), 0),
        };
      },
      () => settler.status().failing !== null,
    );
    metrics.readLoop('settle', settler.cost);
    // An order written here ends the settler's idle rest (Settler.nudge).
    telemetry.listen({
      arrived: () => undefined,
      answered: (_productId, code) => {
        if (code === CREATED) settler.nudge();
      },
    });
  }

  private starting?: Promise<void>;
  private readonly stopping = new AbortController();

  /**
   * Migrates, then settles; in the background, so that an instance starts, and sells,
   * while PostgreSQL is away: it migrates (and starts settling) once it answers.
   */
  onApplicationBootstrap(): void {
    this.starting = this.migrateThenSettle();
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.stopping.abort();
    await this.starting;
    await this.settler.stop();
  }

  private async migrateThenSettle(): Promise<void> {
    // Once the Redis client is ready (a cluster's slot map read): the mark and the first
    // pass, sent before, would only fail and say settlement fails at every start. Past
    // the wait it goes on anyway, and says what it meets.
    const stopped = new Promise<void>((resolve) =>
      this.stopping.signal.addEventListener('abort', () => resolve(), { once: true }),
    );
    await Promise.race([whenReady(this.redis, REDIS_READY_WAIT_MS), stopped]);
    for (let waitMs = 500; !this.stopping.signal.aborted; waitMs = Math.min(waitMs * 2, 5_000)) {
      let step = 'mark the prefix settled in Redis';
      try {
        // First, whatever PostgreSQL does: every instance's resets keep the groups.
        await this.settler.mark();
        step = 'migrate PostgreSQL';
        const applied = await migrate(this.pool);
        this.logger.log(
          `${applied.length > 0 ? `schema migrated (${applied.join(', ')})` : 'schema up to date'}; settling as consumer ${this.settler.consumer}`,
        );
        this.settler.start();
        return;
      } catch (err) {
        this.settler.cannotStart(`cannot ${step}: ${(err as Error).message}`);
        this.logger.warn(
          `cannot ${step}, retrying in ${waitMs} ms (the sale goes on; orders wait in Redis): ${(err as Error).message}`,
        );
        await sleep(waitMs, undefined, { signal: this.stopping.signal }).catch(() => undefined);
      }
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.pool.end();
  }
}

/** settlement/: every order event into PostgreSQL exactly once (Settler). Only with DATABASE_URL. */
@Module({})
export class SettlementModule {
  static forRoot(config: SettlementConfig): DynamicModule {
    if (!config.databaseUrl)
      return { module: SettlementModule, global: true, providers: [SettlementLag], exports: [SettlementLag] };
    return {
      module: SettlementModule,
      global: true,
      providers: [
        { provide: PG_POOL, useFactory: () => createPool(config) },
        {
          provide: Settler,
          inject: [REDIS_CLIENT, PG_POOL, KeyLayout, FaultStop],
          useFactory: (redis: RedisClient, pool: Pool, keys: KeyLayout, faults: FaultStop) => {
            const logger = new Logger('Settlement');
            return new Settler(redis, pool, keys, config, faults, (line) => logger.warn(line));
          },
        },
        SettlerLifecycle,
        SettlementLag,
      ],
      exports: [PG_POOL, Settler, SettlementLag],
    };
  }
}
