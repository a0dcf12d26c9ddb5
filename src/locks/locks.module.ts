import { DynamicModule, Inject, Logger, Module, OnApplicationShutdown, Optional } from '@nestjs/common';
import type { RedisClient } from '../redis/create-client';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { LockName, LockStrategyName, StrategyConfig } from '../settings/strategy.config';
import { Metrics } from '../telemetry/metrics';
import { Lock } from './lock';
import { LOCKS_CONFIG, LocksConfig } from './locks.config';
import { MeteredLock } from './metered-lock';
import { ExpiryTimestampStrategy } from './strategies/expiry-timestamp.strategy';
import { FencedLockStrategy } from './strategies/fenced.strategy';
import { GetThenDelStrategy } from './strategies/get-then-del.strategy';
import { SetNxLockStrategy } from './strategies/lock.strategy';
import { NoLockStrategy } from './strategies/none.strategy';
import { createRedlockNodes, RedlockStrategy } from './strategies/redlock.strategy';
import { ReentrantStrategy } from './strategies/reentrant.strategy';
import { SetnxNoTtlStrategy } from './strategies/setnx-no-ttl.strategy';
import { SetnxThenExpireStrategy } from './strategies/setnx-then-expire.strategy';
import { UncheckedDelStrategy } from './strategies/unchecked-del.strategy';

/** LOCK_STRATEGY value -> lock; the config's list of lock names is checked against it at compile time. */
const LOCKS: Record<LockName, (redis: RedisClient, config: LocksConfig) => Lock> = {
  lock: (redis, config) => new SetNxLockStrategy(redis, timing(config)),
  fenced: (redis, config) => new FencedLockStrategy(redis, timing(config)),
  reentrant: (redis, config) => new ReentrantStrategy(redis, timing(config)),
  redlock: (_redis, config) =>
    new RedlockStrategy(createRedlockNodes(config.redlockUrls, config.lockTtlMs), timing(config)),
  none: () => new NoLockStrategy(),
  'setnx-no-ttl': (redis, config) => new SetnxNoTtlStrategy(redis, timing(config)),
  'setnx-then-expire': (redis, config) => new SetnxThenExpireStrategy(redis, timing(config)),
  'unchecked-del': (redis, config) => new UncheckedDelStrategy(redis, timing(config)),
  'get-then-del': (redis, config) => new GetThenDelStrategy(redis, timing(config)),
  'expiry-timestamp': (redis, config) => new ExpiryTimestampStrategy(redis, timing(config)),
};

function timing(config: LocksConfig) {
  return { ttlMs: config.lockTtlMs, waitMs: config.lockWaitMs };
}

/** With TELEMETRY on: the lock timed per hold, its lost holds counted at each scrape. Off: the lock itself. */
function metered(lock: Lock, metrics: Metrics): Lock {
  if (!metrics.enabled) return lock;
  metrics.countLostLocks(() => lock.lostLocks);
  return new MeteredLock(lock, metrics);
}

function isLockName(name: LockStrategyName): name is LockName {
  return name in LOCKS;
}

/**
 * locks/: distributed locks and nothing else. Provides the `Lock` that LOCK_STRATEGY
 * names (none for a lock-free strategy) and closes its connections on shutdown.
 */
@Module({})
export class LocksModule implements OnApplicationShutdown {
  constructor(@Optional() @Inject(Lock) private readonly lock?: Lock) {}

  static forRoot(config: StrategyConfig): DynamicModule {
    const name = config.lockStrategy;
    if (!isLockName(name)) return { module: LocksModule };
    return {
      module: LocksModule,
      providers: [
        {
          provide: Lock,
          inject: [REDIS_CLIENT, LOCKS_CONFIG.token, Metrics],
          useFactory: (redis: RedisClient, config: LocksConfig, metrics: Metrics) =>
            metered(LOCKS[name](redis, config), metrics),
        },
      ],
      exports: [Lock],
    };
  }

  /** Runs after the HTTP server has drained: a lock with connections of its own closes them. */
  async onApplicationShutdown(): Promise<void> {
    if (!this.lock) return;
    await this.lock.close();
    new Logger('Locks').log('lock connections closed');
  }
}
