import { DynamicModule, Inject, Injectable, Logger, Module, OnApplicationBootstrap, Type } from '@nestjs/common';
import { LOCKS_CONFIG } from '../locks/locks.config';
import { LocksModule } from '../locks/locks.module';
import { REDIS_CONFIG } from '../redis/redis.config';
import { LESSONS_CONFIG, LessonsConfig } from '../settings/lessons.config';
import { ConfigsOf, configView } from '../settings/setting';
import { LockStrategyName, STRATEGY_CONFIG, StrategyConfig, UNSAFE_STRATEGIES } from '../settings/strategy.config';
import { UNITS_LEFT, UnitsLeft } from '../door/waiting-room';
import { Checkout } from './checkout';
import { Escrow } from './escrow';
import { FaultStop } from './fault-stop';
import { PURCHASE_CONFIG } from './orders.config';
import { Idempotency } from './idempotency';
import { ExpirySweeper } from './expiry-sweeper';
import { OrderOutcomes } from './order-outcomes';
import { OrderOutcomesController } from './order-outcomes.controller';
import { OrdersController } from './orders.controller';
import { BatchedPurchases } from './purchases/batched.purchases';
import { OptimisticPurchases } from './purchases/optimistic.purchases';
import { PerBuyerPurchases } from './purchases/per-buyer.purchases';
import { PurchasePath } from './purchases/purchase-path';
import { ReentrantPurchases } from './purchases/reentrant.purchases';
import { ScriptedPurchases } from './purchases/scripted.purchases';
import { ReplicaAcks } from './replica-acks';
import { StrategyMismatches } from './strategy-mismatches';

/** LOCK_STRATEGY value -> the way a purchase is made; the config's list of names is checked against it at compile time. */
const PURCHASE_PATHS: Record<LockStrategyName, Type<PurchasePath>> = {
  // Correct locks that serve a batch of this process's buyers per hold.
  lock: BatchedPurchases,
  fenced: BatchedPurchases,
  redlock: BatchedPurchases,
  // One buyer per hold: the reentrant lock (re-entered to record the order), and the
  // unsafe ones, kept as naive as the recipes they teach.
  reentrant: ReentrantPurchases,
  none: PerBuyerPurchases,
  'setnx-no-ttl': PerBuyerPurchases,
  'setnx-then-expire': PerBuyerPurchases,
  'unchecked-del': PerBuyerPurchases,
  'get-then-del': PerBuyerPurchases,
  'expiry-timestamp': PerBuyerPurchases,
  // No lock at all.
  atomic: ScriptedPurchases,
  optimistic: OptimisticPurchases,
};

/**
 * orders/: POST /api/orders and the ways to make a purchase. The path LOCK_STRATEGY
 * selects is chosen here, once, and provided as `PurchasePath` to whoever needs it
 * (the controller; products/ for a sale reset; health/); none of them branches on it.
 */
@Module({})
export class OrdersModule {
  static forRoot(config: StrategyConfig): DynamicModule {
    return {
      module: OrdersModule,
      global: true,
      imports: [LocksModule.forRoot(config)],
      controllers: [OrdersController, OrderOutcomesController],
      providers: [
        { provide: PurchasePath, useClass: PURCHASE_PATHS[config.lockStrategy] },
        PURCHASE_CONFIG.provider,
        ANNOUNCED.provider,
        {
          provide: FaultStop,
          inject: [LESSONS_CONFIG.token],
          useFactory: (c: LessonsConfig) => new FaultStop(c.faultStopAt),
        },
        Checkout,
        Escrow,
        // The waiting room's count of a bucketed product's units (the door does not import orders/).
        {
          provide: UNITS_LEFT,
          inject: [Escrow],
          useFactory:
            (escrow: Escrow): UnitsLeft =>
            (id, first, fresh) =>
              escrow.left(id, first, fresh),
        },
        Idempotency,
        ReplicaAcks,
        StrategyMismatches,
        OrderOutcomes,
        ExpirySweeper,
        Announcement,
      ],
      exports: [
        Checkout,
        Escrow,
        UNITS_LEFT,
        PurchasePath,
        StrategyMismatches,
        FaultStop,
        OrderOutcomes,
        ExpirySweeper,
      ],
    };
  }
}

/** What the boot line says. */
const ANNOUNCED = configView('announced', STRATEGY_CONFIG, LOCKS_CONFIG, REDIS_CONFIG, LESSONS_CONFIG);
type Announced = ConfigsOf<typeof ANNOUNCED.sections>;

/**
 * One line at boot says what runs; an unsafe strategy or a fault hook says it loudly.
 * Logged at bootstrap, not while the module is declared, so LOG_LEVEL (and a test's
 * `logger: false`) applies to it.
 */
@Injectable()
class Announcement implements OnApplicationBootstrap {
  private readonly logger = new Logger('Orders');

  constructor(@Inject(ANNOUNCED.token) private readonly config: Announced) {}

  onApplicationBootstrap(): void {
    announce(this.logger, this.config);
  }
}

function announce(logger: Logger, config: Announced): void {
  const name = config.lockStrategy;
  const path = PURCHASE_PATHS[name].name;
  if (UNSAFE_STRATEGIES.includes(name)) {
    logger.warn('*'.repeat(72));
    logger.warn(`LOCK_STRATEGY=${name} IS UNSAFE: it oversells under concurrency.`);
    logger.warn('It runs only because ALLOW_UNSAFE=1; never use it for a real sale.');
    logger.warn('*'.repeat(72));
  } else {
    logger.log(`strategy ${name}: ${path} (lock TTL ${config.lockTtlMs} ms, wait ${config.lockWaitMs} ms)`);
  }
  if (config.redisWaitReplicas > 0) {
    logger.log(
      `REDIS_WAIT_REPLICAS=${config.redisWaitReplicas}: a 201 waits for that many replicas to have the order (at most ${config.redisWaitTimeoutMs} ms, else 503 OUTCOME_UNKNOWN)`,
    );
  }
  if (config.faultStopAt) {
    const { point, nth } = config.faultStopAt;
    logger.warn(`FAULT_STOP_AT=${point}:${nth}: this process will SIGSTOP itself; for the fault suite only`);
  }
}
