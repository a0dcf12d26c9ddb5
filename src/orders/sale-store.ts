import { Cluster, type Redis } from 'ioredis';
import {
  AdmissionInvalidError,
  AppError,
  IdempotencyKeyInUseError,
  LockBypassedError,
  OutcomeUnknownError,
  SaleEndedError,
  SaleNotStartedError,
  StaleLockError,
  StrategyMismatchError,
} from '../errors/errors';
import { execAll } from '../redis/exec-all';
import { productIdOf, type ProductKeys } from '../redis/key-layout';
import {
  fencedWrite,
  fencedWriteKeys,
  keyedWrite,
  keyedWriteKeys,
  OrderSkipped,
  ScriptClient,
} from '../redis/lua-scripts';
import { isOutcomeUnknown } from '../redis/redis-errors';
import { Claim, OrderRequest, OUTCOME_TTL_MS } from './order';
import type { SaleState } from './sale-rules';

/** A product's limit and stock (null: no sale), and each asking buyer's units, as read in one round trip. */
export interface SaleRead {
  readonly sale: {
    readonly perUserLimit: number;
    readonly stock: number;
    /** Meta's saleId: which sale this read saw ('' for one started before sale ids). */
    readonly saleId: string;
    /** The sale window (ms; null: unbounded) and Redis's clock when this was read. */
    readonly startsAt: number | null;
    readonly endsAt: number | null;
    readonly now: number;
    /** Whether the sale has a waiting room: then only a buyer with a pass may buy. */
    readonly queued: boolean;
    /** Meta's `epoch`: the sale of a product of several buckets, the same in each ('' for one bucket). */
    readonly epoch: string;
  } | null;
  /** Units bought so far, per buyer asked for, in the order asked. */
  readonly bought: readonly number[];
  /** The Idempotency-Key fields asked for, as they are now (claims or outcomes; null if absent). */
  readonly claims: readonly (string | null)[];
}

/**
 * The reads every decision needs, for one buyer or a batch, in one round trip: the
 * limit, the stock and `HMGET` of the buyers' counts. On an auto-pipelining client
 * the pipeline also shares a socket write with every other buyer's reads of the tick.
 * Throws StrategyMismatchError when the sale was started by instances of another
 * strategy family than `family` (strategyFamily()): their purchases and ours would not
 * exclude each other. A sale that recorded none (started before families) is anyone's.
 */
export async function readSale(
  redis: Pick<Redis, 'multi' | 'pipeline'>,
  k: ProductKeys,
  family: string,
  userIds: readonly string[],
  claimKeys: readonly string[] = [],
  /** SALE_CLOCK=app (saleClock()): the naive window check by this process's clock instead of Redis's. */
  clock?: (redisNow: number) => number,
): Promise<SaleRead> {
  // On a cluster a MULTI, not a pipeline: while the product's slot moves, a pipeline of
  // reads whose one key has left is sent again whole to the new owner by ioredis, where
  // the others read nil; a MULTI is aborted whole (TRYAGAIN, ASK) and sent again whole.
  // Elsewhere a pipeline: on a WATCH connection an EXEC would end the WATCH.
  const pipeline = (redis instanceof Cluster ? redis.multi() : redis.pipeline())
    .hmget(k.meta, 'perUserLimit', 'soldBy', 'saleId', 'startsAt', 'endsAt', 'queueRate', 'epoch')
    .get(k.stock)
    // The window is judged by the clock of the Redis that holds the sale, read in the
    // same step as the stock: never by this process's clock, which may run ahead.
    .time()
    .hmget(k.buyers, ...userIds);
  if (claimKeys.length > 0) pipeline.hmget(k.idem, ...claimKeys);
  return saleReadOf(await execAll(pipeline), k, family, clock);
}

/**
 * The read fenced-acquire-6.lua takes with the lock (UsingOptions.readAtAcquire, its
 * ARGV[3..]): readSale()'s, for these buyers and Idempotency-Keys, in one step with the
 * acquisition. The script reads the same meta fields in the same order as readSale();
 * batched.purchases.spec.ts reads one sale both ways.
 */
export function acquireReadArgs(userIds: readonly string[], claimKeys: readonly string[]): [number, ...string[]] {
  return [userIds.length, ...userIds, ...claimKeys];
}

/**
 * A SaleRead from the replies of readSale()'s reads, in their order: the pipeline's, or
 * those fenced-acquire-6.lua took with the lock (Hold.read). Throws as readSale() does.
 */
export function saleReadOf(
  replies: readonly unknown[],
  k: ProductKeys,
  family: string,
  clock?: (redisNow: number) => number,
): SaleRead {
  const [[limit, soldBy, saleId, startsAt, endsAt, queueRate, epoch], stock, time, bought, claims] = replies as [
    (string | null)[],
    string | null,
    [string, string] | number,
    (string | null)[],
    (string | null)[] | undefined,
  ];
  // TIME's seconds and microseconds; the script's nowMs() (includes/clock.lua) in ms.
  const redisNow = typeof time === 'number' ? time : Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
  if (soldBy && soldBy !== family) throw new StrategyMismatchError(productOf(k), soldBy, family);
  return {
    sale:
      limit === null || stock === null
        ? null
        : {
            perUserLimit: Number(limit),
            stock: Number(stock),
            saleId: saleId ?? '',
            startsAt: startsAt === null ? null : Number(startsAt),
            endsAt: endsAt === null ? null : Number(endsAt),
            now: (clock ?? Number)(redisNow),
            queued: queueRate !== null,
            epoch: epoch ?? '',
          },
    bought: bought.map((b) => Number(b ?? 0)),
    claims: claims ?? [],
  };
}

/** The product id in a product's keys, for a message. */
function productOf(k: ProductKeys): string {
  return productIdOf(k.stock) ?? k.stock;
}

/**
 * Whether a claim field read from Redis is still `claim`'s (not given up, taken over or
 * decided): the holder's early look, so a lapsed claim's order takes no units from the
 * decision; the write checks it again in Redis (isClaimOf, includes/idempotency-field.lua,
 * which defines the field; lua-scripts.spec.ts runs both on the same fields).
 */
export function stillClaimed(held: string | null | undefined, claim: Claim): boolean {
  return held?.startsWith(`P|${claim.claimId}|`) ?? false;
}

/** The state the rules see for the `i`th buyer of a read (null: the product has no sale). */
export function buyerState(read: SaleRead, i: number): SaleState | null {
  return read.sale && { ...read.sale, bought: read.bought[i] };
}

/**
 * keyed-write-7.lua's ARGV for a batch of accepted orders. `clock` (SALE_CLOCK=app,
 * saleClock()) judges the window by this process's clock instead of Redis's.
 */
export function keyedWriteArgs(
  k: ProductKeys,
  accepted: readonly AcceptedOrder[],
  clock?: (redisNow: number) => number,
): [number, number | '', string, ...(string | number)[]] {
  return [OUTCOME_TTL_MS, clock ? clock(0) : '', k.marksGuess, ...orderArgs(accepted)];
}

/** Per order, the six values the write scripts take: userId, quantity, orderId, Idempotency-Key, claim id, pass expiry. */
function orderArgs(accepted: readonly AcceptedOrder[]): (string | number)[] {
  return accepted.flatMap(({ order, orderId }) => [
    order.userId,
    order.quantity,
    orderId,
    order.claim?.key ?? '',
    order.claim?.claimId ?? '',
    order.passExpiresAt ?? '',
  ]);
}

/** The stock left after an order, or why the write skipped it (nothing of it written). */
export type Written = number | OrderSkipped;

/** The refusal of an order a write skipped: the same whichever script skipped it. */
export function skippedError(why: OrderSkipped): AppError {
  // CLAIM_LOST: another request decides its Idempotency-Key (its claim lapsed or was taken
  // over); PASS_EXPIRED: its Admission-Pass lapsed while it waited for the write.
  return why === 'CLAIM_LOST' ? new IdempotencyKeyInUseError(0) : new AdmissionInvalidError('has expired');
}

/** A write script's entry for one order: the stock left after it, or why it was skipped. */
function writtenOf(entry: number | string): Written {
  return entry === 'CLAIM_LOST' || entry === 'PASS_EXPIRED' ? entry : Number(entry);
}

/**
 * keyed-write-7.lua's reply: the stock left after each order, or why one was skipped;
 * throws the window's refusal when the write found the sale closed (nothing written).
 */
export function keyedWriteLeft(k: ProductKeys, left: readonly (number | string)[]): Written[] {
  windowRefusal(k, left);
  return left.map(writtenOf);
}

/**
 * Throws what a write script said of the sale window (judged by Redis's clock in the
 * step that writes: a holder that read inside the window and writes after its end
 * sells nothing), if it said anything.
 */
function windowRefusal(k: ProductKeys, reply: readonly (number | string)[]): void {
  if (reply[0] === 'SALE_ENDED') throw new SaleEndedError(productOf(k), Number(reply[1]));
  if (reply[0] === 'SALE_NOT_STARTED') {
    throw new SaleNotStartedError(productOf(k), Number(reply[1]), Number(reply[2]));
  }
}

/**
 * Awaits a write of orders. A write that was sent and got no reply may have been
 * applied: it is OUTCOME_UNKNOWN, never REDIS_UNAVAILABLE ("nothing was written"),
 * and never sent again.
 */
export async function orderWrite<T>(write: Promise<T>): Promise<T> {
  try {
    return await write;
  } catch (err) {
    if (isOutcomeUnknown(err)) throw new OutcomeUnknownError();
    throw err;
  }
}

/** An order the rules accepted, with the id it will be acknowledged under. */
export interface AcceptedOrder {
  readonly order: OrderRequest;
  readonly orderId: string;
  /** The stock the holder's decision leaves after this order (for its recorded outcome). */
  readonly remaining: number;
}

/**
 * Writes accepted orders in one round trip and returns the stock left after each, or
 * why one was skipped (nothing of it written, skippedError()): CLAIM_LOST, its
 * Idempotency-Key claim was no longer its request's (another request decides that
 * key), or PASS_EXPIRED, its Admission-Pass lapsed before the write. Each order is written as a reservation
 * (its state and its payment deadline, order-outcome-6.lua) in the same step. Under a
 * plain hold: keyed-write-7.lua, which checks each keyed order's claim as it writes.
 * Under a fenced hold (`fence` given): fenced-write-8.lua, which applies them only if
 * no later lock was issued, else throws StaleLockError with nothing written, and checks
 * each order's claim.
 */
export async function writeOrders(
  redis: ScriptClient,
  k: ProductKeys,
  family: string,
  accepted: readonly AcceptedOrder[],
  fence?: number,
  clock?: (redisNow: number) => number,
): Promise<Written[]> {
  if (fence === undefined) {
    return keyedWriteLeft(
      k,
      await orderWrite(keyedWrite.run(redis, keyedWriteKeys(k), ...keyedWriteArgs(k, accepted, clock))),
    );
  }
  const reply = await orderWrite(
    fencedWrite.run(
      redis,
      fencedWriteKeys(k),
      fence,
      OUTCOME_TTL_MS,
      family,
      clock ? clock(0) : '',
      k.marksGuess,
      ...orderArgs(accepted),
    ),
  );
  const [status, ...rest] = reply;
  if (status === 'STALE_LOCK') throw new StaleLockError(fence, Number(rest[0]));
  windowRefusal(k, reply);
  if (status === 'STRATEGY_MISMATCH') throw new StrategyMismatchError(productOf(k), String(rest[0]), family);
  // The holder checked the stock and the limits under this very hold: a shortfall or
  // a limit exceeded means someone wrote outside it (a holder the fence missed).
  if (status === 'SHORT' || status === 'OVER_LIMIT') throw new LockBypassedError();
  if (status !== 'OK') throw new Error(`fenced write refused: ${status} ${rest.join(' ')}; nothing was written`);
  return rest.map(writtenOf);
}
