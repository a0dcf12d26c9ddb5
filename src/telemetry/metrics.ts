import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { STRATEGY_CONFIG, StrategyConfig } from '../settings/strategy.config';
import { PurchaseListener, PurchaseTelemetry } from './purchase-telemetry';
import { TELEMETRY_CONFIG, TelemetryConfig } from './telemetry.config';

/** What `seckill_redis_errors_total{kind}` counts. A closed set: a label never takes a value from a request. */
export type RedisErrorKind =
  /** An answer REDIS_UNAVAILABLE: Redis did not answer, or too few replicas were live. */
  | 'unavailable'
  /** An answer OUTCOME_UNKNOWN: a write was sent and its reply lost. */
  | 'outcome_unknown'
  /** Redis refused a command it did not run (OOM, MISCONF, NOREPLICAS, READONLY, NOPERM): its own 503 code. */
  | 'refused'
  /** A Redis error reply the app did not expect, answered 500 INTERNAL_ERROR. */
  | 'reply'
  /** An ioredis connection error event (one per failed connect or reconnect attempt). */
  | 'connection';

const REDIS_ERROR_KINDS: readonly RedisErrorKind[] = [
  'unavailable',
  'outcome_unknown',
  'refused',
  'reply',
  'connection',
];

/**
 * How a wait for a lock ended, the `outcome` of `seckill_lock_wait_seconds`. A closed set:
 * the waits that end without the lock are the ones that matter when buyers time out.
 */
export type LockWaitOutcome =
  /** The lock was held (a hold follows, in seckill_lock_hold_seconds). */
  | 'acquired'
  /** LockTimeoutError: the deadline passed first (the buyers hear LOCK_TIMEOUT). */
  | 'timeout'
  /** The caller's signal aborted the wait (the product sold out meanwhile). */
  | 'aborted'
  /** Any other error while waiting (Redis did not answer, an error reply). */
  | 'error';

const LOCK_WAIT_OUTCOMES: readonly LockWaitOutcome[] = ['acquired', 'timeout', 'aborted', 'error'];

/** Seconds, from a fraction of a millisecond (a batch's hold on a local Redis) to the longest LOCK_WAIT_MS a sale should use. */
const LOCK_SECONDS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Buyers per hold: powers of two up to MAX_BATCH (256). */
const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256];
/** Seconds, from a refusal at the door (tens of microseconds) to a purchase that waited out a long LOCK_WAIT_MS. */
const HTTP_SECONDS_BUCKETS = [0.0001, 0.00025, ...LOCK_SECONDS_BUCKETS];

/**
 * The app's Prometheus metrics, on a registry of its own (never prom-client's global
 * one: each app instance, and each of a test file's apps, counts only itself), with
 * Node's default process metrics beside them.
 *
 * What runs per purchase is two integer updates (`arrived`, `answered`): the counts
 * live in plain fields and a Map keyed by the answer's code, and become prom-client
 * values only when /metrics is scraped. A labelled child's `inc()` would hash its
 * labels on every call. Per hold (not per buyer) the lock's wait and hold and the
 * batch size go straight into histograms, and so does each HTTP answer's duration: one
 * observation per request, whatever its route.
 *
 * With TELEMETRY=0 the seckill_ families are not registered, no listener is, and the
 * record methods do nothing: /metrics serves the process metrics and seckill_info.
 */
/** What a background loop has cost Redis: commands sent and passes made, and the work its last pass found. */
export interface LoopCost {
  readonly commands: number;
  readonly passes: number;
  readonly productsWithWork: number;
}

@Injectable()
export class Metrics implements PurchaseListener, OnApplicationShutdown {
  readonly registry = new Registry();
  readonly enabled: boolean;
  /** Answers by code: `CREATED`, `REPLAYED` or an error code from src/errors/errors.ts (a closed table). */
  private readonly answers = new Map<string, number>();
  /** Refusals at the door (src/door), by code: a closed set (RATE_LIMITED, BUYER_TOKEN_*, USER_MISMATCH, ...). */
  private readonly doorRefusals = new Map<string, number>();
  private inProgress = 0;
  private readonly lostLockReaders: (() => number)[] = [];
  private readonly lockWait: Histogram<'outcome'>;
  private readonly lockHold: Histogram;
  private readonly batchSize: Histogram;
  private readonly redisErrors: Counter<'kind'>;
  private readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  /** With settlement on: unsettled entries and the oldest one's age (ms), every product's, read from Redis on scrape. */
  private settlementReader?: () => Promise<{ unsettled: number; oldestMs: number }>;

  constructor(
    @Inject(TELEMETRY_CONFIG.token) config: TelemetryConfig,
    @Inject(STRATEGY_CONFIG.token) { lockStrategy }: StrategyConfig,
    telemetry: PurchaseTelemetry,
  ) {
    this.enabled = config.telemetry;
    collectDefaultMetrics({ register: this.registry });
    const registers = this.enabled ? [this.registry] : [];
    new Gauge({
      name: 'seckill_info',
      help: 'Always 1; the labels say what runs: the lock strategy (LOCK_STRATEGY) and whether TELEMETRY records.',
      labelNames: ['strategy', 'telemetry'],
      registers: [this.registry],
    }).set({ strategy: lockStrategy, telemetry: this.enabled ? '1' : '0' }, 1);
    const answers = this.answers;
    new Counter({
      name: 'seckill_purchases_total',
      help: 'Purchases answered, by answer: code="CREATED" for a 201 that wrote an order, "REPLAYED" for a 201 that answered again an order written before (the same Idempotency-Key or Admission-Pass), else the error code (SOLD_OUT, LOCK_TIMEOUT, ...).',
      labelNames: ['code'],
      registers,
      collect() {
        this.reset();
        for (const [code, n] of answers) this.inc({ code }, n);
      },
    });
    const refusals = this.doorRefusals;
    new Counter({
      name: 'seckill_door_refusals_total',
      help: 'Requests the door refused before the route (rate limits, buyer tokens), by code: RATE_LIMITED, BUYER_TOKEN_REQUIRED, USER_MISMATCH, ...',
      labelNames: ['code'],
      registers,
      collect() {
        this.reset();
        for (const [code, n] of refusals) this.inc({ code }, n);
      },
    });
    const read = () => this.inProgress;
    new Gauge({
      name: 'seckill_purchases_in_progress',
      help: 'Purchases received and not yet answered (waiting for a batch, the lock or Redis).',
      registers,
      collect() {
        this.set(read());
      },
    });
    this.lockWait = new Histogram({
      name: 'seckill_lock_wait_seconds',
      help: 'Time from asking for a product lock to the end of the wait (a batch of buyers asks once), including the wait in this process line, by outcome: acquired, timeout, aborted, error.',
      labelNames: ['outcome'],
      buckets: LOCK_SECONDS_BUCKETS,
      registers,
    });
    // Every outcome shows from the first scrape, at 0, so a rate() of timeouts has a start.
    for (const outcome of LOCK_WAIT_OUTCOMES) this.lockWait.zero({ outcome });
    this.lockHold = new Histogram({
      name: 'seckill_lock_hold_seconds',
      help: 'Time a product lock was held: from acquisition to the end of its release.',
      buckets: LOCK_SECONDS_BUCKETS,
      registers,
    });
    this.batchSize = new Histogram({
      name: 'seckill_batch_size',
      help: 'Buyers served by one hold of a batched path (lock, fenced, redlock): those still waiting once the lock was held.',
      buckets: BATCH_SIZE_BUCKETS,
      registers,
    });
    const readers = this.lostLockReaders;
    new Counter({
      name: 'seckill_lost_locks_total',
      help: 'Holds found lost: a release that found the lock no longer ours, a failed renewal, a fenced write refused (one per hold, each also logged once).',
      registers,
      collect() {
        this.reset();
        this.inc(readers.reduce((sum, lost) => sum + lost(), 0));
      },
    });
    this.redisErrors = new Counter({
      name: 'seckill_redis_errors_total',
      help: 'Redis trouble by kind: answers REDIS_UNAVAILABLE (unavailable) and OUTCOME_UNKNOWN (outcome_unknown), refusals such as OOM, MISCONF, NOREPLICAS, READONLY, NOPERM (refused), unexpected error replies (reply), connection errors (connection).',
      labelNames: ['kind'],
      registers,
    });
    // Every kind shows from the first scrape, at 0, so a rate() has a start.
    for (const kind of REDIS_ERROR_KINDS) this.redisErrors.inc({ kind }, 0);
    this.httpDuration = new Histogram({
      name: 'seckill_http_request_duration_seconds',
      help: "HTTP answers, from the request's headers read to its answer handed to Node, by method, route (the route's pattern, e.g. /api/products/:id; unmatched for a path no route serves) and status.",
      labelNames: ['method', 'route', 'status'],
      buckets: HTTP_SECONDS_BUCKETS,
      registers,
    });
    // A lag that cannot be read (Redis away, a command refused) is NaN, never the last
    // figure or a reassuring 0.
    const unknown = { unsettled: NaN, oldestMs: NaN };
    const settlement = () => this.settlementReader?.().catch(() => unknown);
    new Gauge({
      name: 'seckill_settlement_unsettled',
      help: "Order stream entries not yet settled into PostgreSQL (pending or not yet delivered), every product's, read from Redis on scrape; NaN when it cannot be read; absent without DATABASE_URL.",
      registers,
      async collect() {
        const s = await settlement();
        if (s) this.set(s.unsettled);
      },
    });
    new Gauge({
      name: 'seckill_settlement_oldest_seconds',
      help: "Age of the oldest unsettled order stream entry, by Redis's clock; 0 when settlement has caught up; NaN when it cannot be read.",
      registers,
      async collect() {
        const s = await settlement();
        if (s) this.set(s.oldestMs / 1000);
      },
    });
    const failing = () => this.settlementFailing?.();
    new Gauge({
      name: 'seckill_settlement_failing',
      help: "1 while this instance cannot settle (PostgreSQL refuses or is away, its migrations fail, Redis refuses a command settlement sends; /health's settlement.reason says which), else 0; absent without DATABASE_URL.",
      registers,
      collect() {
        const now = failing();
        if (now !== undefined) this.set(now ? 1 : 0);
      },
    });
    const loops = this.loops;
    const perLoop = (metric: Counter<'loop'>, field: 'commands' | 'passes') => {
      metric.reset();
      for (const [loop, cost] of loops) metric.inc({ loop }, cost[field]);
    };
    new Counter({
      name: 'seckill_loop_redis_commands_total',
      help: "Redis commands this instance's background loops sent (loop=settle: the settler; loop=expiry: the expiry sweeper, its expiry scripts included): what they cost when nothing sells, whatever the number of products listed.",
      labelNames: ['loop'],
      registers,
      collect() {
        perLoop(this, 'commands');
      },
    });
    new Counter({
      name: 'seckill_loop_passes_total',
      help: "Passes of this instance's background loops (settle, expiry): each reads every shard's marks once (src/redis/shard-marks.ts).",
      labelNames: ['loop'],
      registers,
      collect() {
        perLoop(this, 'passes');
      },
    });
    new Gauge({
      name: 'seckill_loop_work',
      help: 'What the last pass found to do: loop=settle, products marked with order log entries to settle; loop=expiry, reservations past their deadline.',
      labelNames: ['loop'],
      registers,
      collect() {
        this.reset();
        for (const [loop, cost] of loops) this.set({ loop }, cost.productsWithWork);
      },
    });
    const escrow = () => this.escrowMoves?.() ?? 0;
    new Counter({
      name: 'seckill_escrow_moves_total',
      help: 'Escrow moves this instance made between a product\'s buckets (docs/scaling.md "One product on several shards"): rights moved to a buyer\'s dry home bucket from the fullest other, landed and closed.',
      registers,
      collect() {
        this.reset();
        this.inc(escrow());
      },
    });
    if (this.enabled) telemetry.listen(this);
  }

  /** The escrow's count of moves, read at each scrape (orders/ imports telemetry/, never the reverse). */
  private escrowMoves?: () => number;

  readEscrow(moves: () => number): void {
    this.escrowMoves = moves;
  }

  /** The background loops' costs, read at each scrape (the settler and the sweeper hand theirs in). */
  private readonly loops = new Map<'settle' | 'expiry', LoopCost>();

  /** A background loop hands in its running cost (settlement/ and orders/ import telemetry/, never the reverse). */
  readLoop(loop: 'settle' | 'expiry', cost: LoopCost): void {
    this.loops.set(loop, cost);
  }

  /** Whether this instance's settlement is failing now; absent without settlement. */
  private settlementFailing?: () => boolean;

  /** Settlement hands in how it reads its lag and its state (settlement/ imports telemetry/, never the reverse). */
  readSettlement(read: () => Promise<{ unsettled: number; oldestMs: number }>, failing: () => boolean): void {
    this.settlementReader = read;
    this.settlementFailing = failing;
  }

  arrived(): void {
    this.inProgress++;
  }

  answered(_productId: string, code: string): void {
    this.inProgress--;
    this.answers.set(code, (this.answers.get(code) ?? 0) + 1);
  }

  /** The door refused a request with `code` (not a purchase: the route never saw it). */
  doorRefused(code: string): void {
    if (this.enabled) this.doorRefusals.set(code, (this.doorRefusals.get(code) ?? 0) + 1);
  }

  /** A lock was waited for `seconds`, and the wait ended so (a metered lock calls it once per `using`). */
  lockWaited(seconds: number, outcome: LockWaitOutcome): void {
    this.lockWait.observe({ outcome }, seconds);
  }

  lockHeld(seconds: number): void {
    this.lockHold.observe(seconds);
  }

  /** A batched hold served `buyers` buyers (at least one: a hold whose buyers all timed out is not a batch). */
  batchServed(buyers: number): void {
    if (this.enabled) this.batchSize.observe(buyers);
  }

  /** An HTTP answer (src/telemetry/http-requests.ts): one observation; `route` is a pattern, so the series are bounded. */
  httpAnswered(method: string, route: string, status: number, seconds: number): void {
    if (this.enabled) this.httpDuration.observe({ method, route, status }, seconds);
  }

  redisError(kind: RedisErrorKind): void {
    if (this.enabled) this.redisErrors.inc({ kind });
  }

  /** Adds a source of lost holds (a lock's own counter), read at each scrape. */
  countLostLocks(read: () => number): void {
    this.lostLockReaders.push(read);
  }

  /**
   * Drops the families and the sources they read. prom-client gives no handle on the GC
   * observer and event-loop-delay monitor collectDefaultMetrics starts; neither holds
   * the process open.
   */
  onApplicationShutdown(): void {
    this.registry.clear();
    this.lostLockReaders.length = 0;
  }
}
