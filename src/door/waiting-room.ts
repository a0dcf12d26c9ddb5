import { Inject, Injectable, Optional } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import {
  BucketsBusyError,
  NoQueueError,
  retryAfterSeconds,
  SaleEndedError,
  SoldOutError,
  UnknownProductError,
  UnknownTicketError,
} from '../errors/errors';
import type { RedisClient } from '../redis/create-client';
import { KeyLayout } from '../redis/key-layout';
import { execAll } from '../redis/exec-all';
import { passUsed, passUsedKeys, queue, queueKeys } from '../redis/lua-scripts';
import { REDIS_CLIENT } from '../redis/redis.constants';

/** Tickets and passes: 128 random bits, base64url. */
const TOKEN = /^[A-Za-z0-9_-]{22}$/;

/** Whether a header value can be a pass at all (checked before it is used as a key in Redis). */
export function passShaped(value: string): boolean {
  return TOKEN.test(value);
}

/** A ticket as GET /api/products/:id/queue/:ticket answers it. */
export interface TicketState {
  readonly ticket: string;
  readonly state: 'waiting' | 'admitted' | 'used' | 'expired' | 'sold_out' | 'ended';
  /** While waiting: 1 = admitted next. 0 once admitted. */
  readonly position: number;
  /** While admitted: the single-use pass to send as Admission-Pass, and when it lapses (ISO 8601). */
  readonly pass?: string;
  readonly passExpiresAt?: string;
  /** While waiting: seconds until the position is likely admitted (the Retry-After hint). */
  readonly retryAfterS?: number;
}

/**
 * The units a product of several escrow buckets has left in all of them and in moves
 * between them (src/orders/escrow.ts left()), or null for a product of one bucket, whose
 * queue reads its own stock. Provided by the orders module, which the door does not import.
 */
export const UNITS_LEFT = Symbol('UNITS_LEFT');
/** `first` runs once the product is known to have several buckets, before any is read, and says the sale's epoch. */
export type UnitsLeft = (
  productId: string,
  first: () => Promise<string>,
  /** Read the product's bucket list afresh (not the one kept for BUCKETS_TRUST_MS). */
  fresh: boolean,
) => Promise<{ readonly units: number; readonly moving: boolean } | null>;

/**
 * Random bytes drawn a page at a time and each used once: a join takes two tokens, and
 * one randomBytes() call per token costs more than the rest of the join's JavaScript.
 */
const RANDOM_PAGE = 4096;
let random = Buffer.alloc(0);
let randomAt = 0;

function newToken(): string {
  if (randomAt + 16 > random.length) {
    random = randomBytes(RANDOM_PAGE);
    randomAt = 0;
  }
  randomAt += 16;
  return random.toString('base64url', randomAt - 16, randomAt);
}

/** How long a count of a bucketed product's units serves its queue here (ms): see counted(). */
export const COUNT_TRUST_MS = 100;
/** Products whose counts an instance keeps at most (then it starts afresh). */
const MAX_COUNTS = 10_000;
/** Runs of the queue's script one join or read makes at most, each after a RECOUNT (then BUCKETS_BUSY). */
const COUNT_ATTEMPTS = 3;

/** A count of a product's units (queue-5.lua's `count`, without `fresh`), and when it began. */
interface Count {
  readonly at: number;
  readonly count: Promise<string>;
}

/**
 * A product's waiting room (PUT `queue: {admitPerSecond, passTtlMs}`): buyers join a
 * FIFO queue and are admitted at the sale's rate, each with a pass that buys once.
 * Everything lives in Redis beside the sale (queue-5.lua), under the product's hash
 * tag: any instance serves any buyer, a crash loses no place, and it works on a
 * cluster. The pass is consumed by the purchase it makes: the purchase claims the
 * Idempotency-Key `pass <pass>` and its write turns the claim into the order's
 * outcome in the same atomic step, so one pass makes one order, and a retry with the
 * pass is answered that order. A product of several escrow buckets keeps its queue in
 * bucket 0 and sells in each buyer's home bucket: the queue admits, and refuses joins
 * SOLD_OUT, by the units of every bucket (UNITS_LEFT), and the pass's claim is made in
 * the home bucket with the pass's record read from bucket 0 (src/orders/idempotency.ts).
 */
@Injectable()
export class WaitingRoom {
  /** Per product: its last count (queue-5.lua's `count`), and when it began. */
  private readonly counts = new Map<string, Count>();

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
    @Optional() @Inject(UNITS_LEFT) private readonly unitsLeft?: UnitsLeft,
  ) {}

  /** Joins `userId` to the queue (or finds the ticket they have). */
  async join(productId: string, userId: string): Promise<TicketState> {
    const k = this.keys.product(productId);
    const [ticket, pass] = [newToken(), newToken()];
    return this.answer(
      productId,
      await this.counted(productId, (count) =>
        queue.run(this.redis, queueKeys(k), 'join', userId, ticket, pass, count),
      ),
    );
  }

  /**
   * The ticket's state. With BUYER_AUTH, `buyer` is the token's `sub`: another buyer's
   * ticket is no ticket of theirs (its pass is the owner's alone).
   */
  async read(productId: string, ticket: string, buyer: string | null = null): Promise<TicketState> {
    if (!TOKEN.test(ticket)) throw new UnknownTicketError(productId);
    const k = this.keys.product(productId);
    const reply = await this.counted(productId, (count) => queue.run(this.redis, queueKeys(k), 'read', ticket, count));
    if (buyer !== null && reply[6] !== undefined && reply[6] !== buyer) throw new UnknownTicketError(productId);
    return this.answer(productId, reply);
  }

  /**
   * Once its order is written, the pass no longer holds units back (best effort: else it
   * does until it lapses; a retry with it is answered its order either way). A product of
   * several buckets (`bucketed`) also counts the `units` it bought, once, in its queue
   * (pass-used-3.lua), which its admissions subtract, and marks it so its ticket reads
   * `used`: its outcome is in its buyer's home bucket, on another shard.
   */
  async used(productId: string, pass: string, units: number, bucketed: boolean): Promise<void> {
    const k = this.keys.product(productId);
    const marked = bucketed
      ? passUsed.run(this.redis, passUsedKeys(k), pass, units)
      : this.redis.zrem(k.admitted, pass);
    await marked.catch(() => undefined);
  }

  /**
   * Runs queue-5.lua with its `count`: the one countNow() took for this product here under
   * COUNT_TRUST_MS ago, shared by its joins and reads (a count stays safe to admit by,
   * however old: what sold since is subtracted, or still outstanding), or one begun
   * during the request (its own, or another's begun since). The script answers RECOUNT
   * to a count of another sale or of the wrong shape (a PUT or DELETE since), and to one
   * kept from before the request with nothing left to serve (what is left, if anything,
   * only a count begun during the request says): then it runs again, on a count begun
   * during the request and not the one refused.
   */
  private async counted<R extends readonly unknown[]>(
    productId: string,
    run: (count: string) => Promise<R>,
  ): Promise<R> {
    if (!this.unitsLeft) return run('');
    const began = performance.now();
    let refused: Count | undefined;
    for (let attempt = 1; attempt <= COUNT_ATTEMPTS; attempt++) {
      const known = this.counts.get(productId);
      const usable =
        known !== undefined &&
        known !== refused &&
        (known.at >= began || (attempt === 1 && began - known.at < COUNT_TRUST_MS));
      const used = usable ? known : this.startCount(productId, attempt > 1);
      const count = await used.count;
      const reply = await run(count === '' ? '' : `${count}|${used.at >= began ? 1 : 0}`);
      if (reply[0] !== 'RECOUNT') return reply;
      refused = used;
    }
    throw new BucketsBusyError(COUNT_ATTEMPTS, 'moving');
  }

  /**
   * A count begun now (`fresh`: of the product's buckets as read now), kept for the
   * product's other joins and reads; not one that failed, nor one of a product of one
   * bucket or none (its own stock, which its script reads: nothing to share).
   */
  private startCount(productId: string, fresh = false): Count {
    if (this.counts.size >= MAX_COUNTS) this.counts.clear();
    const count = { at: performance.now(), count: this.countNow(productId, fresh) };
    const drop = () => {
      if (this.counts.get(productId) === count) this.counts.delete(productId);
    };
    count.count.then((c) => c === '' && drop(), drop);
    this.counts.set(productId, count);
    return count;
  }

  /** Forgets the count kept of a product (its sale started, restarted or deleted here). */
  forget(productId: string): void {
    this.counts.delete(productId);
  }

  /**
   * '' for a product of one bucket (or none), which reads its own stock; else
   * `<units>|<moving>|<usedAt>|<epoch>|<countedAt>` (counted() adds `|<fresh>`): what
   * every bucket has (Escrow.left(); `moving`: 1 if moves are in flight that could not
   * land, their units not counted), and, read first in one step on the queue's shard, the
   * units of the passes marked used, the sale's epoch and Redis's clock.
   */
  private async countNow(productId: string, fresh = false): Promise<string> {
    const k = this.keys.product(productId);
    let before = '';
    const left = await this.unitsLeft!(
      productId,
      async () => {
        const [used, epoch, [s, us]] = (await execAll(
          this.redis.multi().hget(k.meta, 'queueUsed').hget(k.meta, 'epoch').time(),
        )) as [string | null, string | null, [string, string]];
        before = `${used ?? 0}|${epoch ?? ''}|${Number(s) * 1000 + Math.floor(Number(us) / 1000)}`;
        return epoch ?? '';
      },
      fresh,
    );
    return left === null ? '' : `${left.units}|${left.moving ? 1 : 0}|${before}`;
  }

  private answer(productId: string, reply: Awaited<ReturnType<typeof queue.run>>): TicketState {
    const [state, ticket, position, pass, expires, rate, , opensIn] = reply;
    if (state === 'UNKNOWN_PRODUCT') throw new UnknownProductError(productId);
    if (state === 'NO_QUEUE') throw new NoQueueError(productId);
    if (state === 'UNKNOWN_TICKET') throw new UnknownTicketError(productId);
    if (state === 'SOLD_OUT') throw new SoldOutError(productId);
    if (state === 'SALE_ENDED') throw new SaleEndedError(productId, Number(ticket));
    const base = { ticket: ticket!, state: state as TicketState['state'], position: position! };
    if (state === 'admitted') return { ...base, pass, passExpiresAt: new Date(expires!).toISOString() };
    // Before the start nobody is admitted: the place waits for the opening, then its turn.
    if (state === 'waiting') {
      return { ...base, retryAfterS: retryAfterSeconds((opensIn ?? 0) + (position! * 1000) / rate!) };
    }
    return base;
  }
}
