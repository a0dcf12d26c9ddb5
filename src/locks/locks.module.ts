import { Global, Inject, Logger, Module, OnApplicationShutdown } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { AppConfig, LockStrategyName } from '../config/app-config';
import { APP_CONFIG } from '../config/config.constants';
import { createRedisClient } from '../redis/create-client';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { LOCK_STRATEGY, PurchaseStrategy } from './lock-strategy';
import { AtomicStrategy } from './strategies/atomic.strategy';
import { ExpiryTimestampStrategy } from './strategies/expiry-timestamp.strategy';
import { FencedLockStrategy } from './strategies/fenced.strategy';
import { GetThenDelStrategy } from './strategies/get-then-del.strategy';
import { SetNxLockStrategy } from './strategies/lock.strategy';
import { NoLockStrategy } from './strategies/none.strategy';
import { OptimisticStrategy } from './strategies/optimistic.strategy';
import { RedlockStrategy } from './strategies/redlock.strategy';
import { ReentrantStrategy } from './strategies/reentrant.strategy';
import { SetnxNoTtlStrategy } from './strategies/setnx-no-ttl.strategy';
import { SetnxThenExpireStrategy } from './strategies/setnx-then-expire.strategy';
import { UncheckedDelStrategy } from './strategies/unchecked-del.strategy';

/** LOCK_STRATEGY value -> strategy. The config's list of names is checked against it at compile time. */
const STRATEGIES: Record<LockStrategyName, (redis: Redis, config: AppConfig) => PurchaseStrategy> = {
  lock: (redis, config) => new SetNxLockStrategy(redis, timing(config)),
  fenced: (redis, config) => new FencedLockStrategy(redis, timing(config)),
  reentrant: (redis, config) => new ReentrantStrategy(redis, timing(config)),
  redlock: (_redis, config) =>
    new RedlockStrategy(
      config.redlockUrls.map((url, i) => createRedisClient(url, `Redlock node ${i + 1}`)),
      timing(config),
    ),
  atomic: (redis) => new AtomicStrategy(redis),
  optimistic: (redis, config) => new OptimisticStrategy(redis, config.lockWaitMs),
  none: () => new NoLockStrategy(),
  'setnx-no-ttl': (redis, config) => new SetnxNoTtlStrategy(redis, timing(config)),
  'setnx-then-expire': (redis, config) => new SetnxThenExpireStrategy(redis, timing(config)),
  'unchecked-del': (redis, config) => new UncheckedDelStrategy(redis, timing(config)),
  'get-then-del': (redis, config) => new GetThenDelStrategy(redis, timing(config)),
  'expiry-timestamp': (redis, config) => new ExpiryTimestampStrategy(redis, timing(config)),
};

function timing(config: AppConfig) {
  return { ttlMs: config.lockTtlMs, waitMs: config.lockWaitMs };
}

export function createLockStrategy(redis: Redis, config: AppConfig): PurchaseStrategy {
  const strategy = STRATEGIES[config.lockStrategy](redis, config);
  const logger = new Logger('Locks');
  if (strategy.unsafe) {
    logger.warn('*'.repeat(72));
    logger.warn(`LOCK_STRATEGY=${strategy.name} IS UNSAFE: it oversells under concurrency.`);
    logger.warn('It runs only because ALLOW_UNSAFE=1; never use it for a real sale.');
    logger.warn('*'.repeat(72));
  } else {
    logger.log(
      strategy.kind === 'lock'
        ? `lock strategy: ${strategy.name} (TTL ${config.lockTtlMs} ms, wait ${config.lockWaitMs} ms)`
        : `lock-free strategy: ${strategy.name}`,
    );
  }
  return strategy;
}

@Global()
@Module({
  providers: [{ provide: LOCK_STRATEGY, inject: [REDIS_CLIENT, APP_CONFIG], useFactory: createLockStrategy }],
  exports: [LOCK_STRATEGY],
})
export class LocksModule implements OnApplicationShutdown {
  constructor(@Inject(LOCK_STRATEGY) private readonly strategy: PurchaseStrategy) {}

  /** Runs after the HTTP server has drained: strategies with connections of their own close them. */
  async onApplicationShutdown(): Promise<void> {
    await this.strategy.close?.();
  }
}
