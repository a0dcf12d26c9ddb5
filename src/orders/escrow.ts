import { randomUUID } from 'node:crypto';
import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import type { RedisClient } from '../redis/create-client';
import { execAll } from '../redis/exec-all';
import { KeyLayout } from '../redis/key-layout';
import { moveDone, moveDoneKeys, moveIn, moveInKeys, moveOut, moveOutKeys } from '../redis/lua-scripts';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { bucketsOf, homeBucket, listOf, loggedMoves } from '../sale/buckets';
import { FaultStop } from './fault-stop';
import { PurchasePath } from './purchases/purchase-path';
import { ReplicaAcks } from './replica-acks';
import { Metrics } from '../telemetry/metrics';
import { BucketsBusyError, OutcomeUnknownError, RedisUnavailableError } from '../errors/errors';

/** How long an instance trusts the bucket list it read: a product's buckets are fixed for its life (PUT refuses a change). */
export const BUCKETS_TRUST_MS = 1_000;

/** Reads of the buckets one refill makes before it lets its buyer try again. */
const REFILL_ROUNDS = 4;
/** Rounds of a refill (or a count) whose reads found units back in several buckets before it answers BUCKETS_BUSY. */
const RETURNS_ROUNDS = 2;
/** Products whose bucket lists an instance keeps at most (then it starts afresh). */
const MAX_LISTS = 10_000;

/** A move logged on its source and not yet closed (move-out-4.lua's record). */
interface InFlight {
  readonly id: string;
  readonly source: string;
  readonly destination: string;
  readonly units: number;
  readonly epoch: string;
}

/** One bucket as a refill reads it. */
interface BucketRead {
  readonly id: string;
  readonly stock: number;
  readonly epoch: string | null;
  /** Its moves in flight of its current sale (older ones are closed as they are found). */
  readonly inFlight: readonly InFlight[];
  /** Its moves of an earlier sale, to close. */
  readonly stale: readonly InFlight[];
  /** Moves out and in it has made (its moves hash's `v`): unchanged between two reads, no unit moved through it. */
  readonly version: string;
  /**
   * Units its orders gave back (cancels, expiries: meta's unitsReturned, counted by
   * order-outcome-6.lua since its sale began), read before its stock: unchanged between
   * two reads, no unit came back to it between them. Null for a sale that keeps no count
   * (begun by a version before it): its returns are unknown, taken as changed (returnedTo()).
   */
  readonly returned: string | null;
  /**
   * No move through it and no restart of its sale between the first and the last of its
   * read's commands (its version and its epoch read before its stock and after: a
   * pipeline is not atomic, another client's commands may run between them, and a move
   * or a reset there would show the stock from before it beside the rest from after).
   */
  readonly steady: boolean;
}

/** Where a buyer buys a product: its buckets and the buyer's home among them. */
export interface Home {
  readonly productId: string;
  readonly buckets: readonly string[];
  /** The home bucket's id (the product's own for one bucket). */
  readonly bucketId: string;
  /**
   * Which list it is (listOf() of bucket 0's epoch; '' for one bucket): a purchase checks
   * its bucket is of it still (OrderLine.bucketList). Null for a sale of the version before
   * lists: nothing to check.
   */
  readonly list: string | null;
}

/** A product's bucket ids as one read of bucket 0's meta found them, and which list they are (listOf()). */
interface BucketList {
  readonly buckets: string[];
  readonly list: string | null;
}

/**
 * Escrow between a product's buckets (src/sale/buckets.ts): each bucket holds rights to
 * part of the stock and sells them in its own scripts; when a buyer's home bucket is dry,
 * rights move to it from the bucket that has the most (move()). A move is three scripts,
 * each atomic on its own shard: the source gives the units up and logs the move
 * (move-out-4.lua), the destination takes them, once per transfer id (move-in-4.lua),
 * the source closes the record (move-done-3.lua). Whatever stops between them, the units
 * are in flight, in no stock, and whoever reads the log next lands them (land()): never
 * in two buckets, never lost. SOLD_OUT is only for a product whose every bucket was read
 * dry with nothing in flight (refill() returns 0).
 */
@Injectable()
export class Escrow {
  private readonly logger = new Logger('Escrow');
  private readonly lists = new Map<string, BucketList & { until: number }>();
  /** One refill at a time per home bucket in this process: the others wait for it. */
  private readonly refills = new Map<string, { readonly startedAt: number; readonly result: Promise<number | null> }>();
  /** Moves this process made, landed and closed (for the bench's report and /metrics). */
  moves = 0;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
    private readonly purchases: PurchasePath,
    private readonly faults: FaultStop,
    private readonly replicas: ReplicaAcks,
    @Optional() metrics?: Metrics,
  ) {
    metrics?.readEscrow(() => this.moves);
  }

  /** The buyer's home bucket for `productId`, from the bucket list read at most BUCKETS_TRUST_MS ago. */
  async home(productId: string, userId: string, fresh = false): Promise<Home> {
    const { buckets, list } = await this.list(productId, fresh);
    return { productId, buckets, bucketId: buckets[homeBucket(userId, buckets.length)], list };
  }

  /** A product's bucket ids, bucket 0 (its own id) first ([productId] for a product without a sale). */
  async buckets(productId: string, fresh = false): Promise<string[]> {
    return (await this.list(productId, fresh)).buckets;
  }

  private async list(productId: string, fresh: boolean): Promise<BucketList> {
    const now = performance.now();
    const known = this.lists.get(productId);
    if (known && known.until > now && !fresh) return known;
    const [sale, field, epoch] = await this.redis.hmget(
      this.keys.product(productId).meta,
      'initialStock',
      'buckets',
      'epoch',
    );
    const list = { buckets: bucketsOf(productId, field), list: listOf(epoch ?? '') };
    // Only sales are kept, and only so many: ids that name no product cost a read, never memory.
    if (sale !== null) {
      if (this.lists.size >= MAX_LISTS) this.lists.clear();
      this.lists.set(productId, { ...list, until: now + BUCKETS_TRUST_MS });
    }
    return list;
  }

  /** Forgets what this instance read of a product's buckets (its sale restarted or deleted here). */
  forget(productId: string): void {
    this.lists.delete(productId);
  }

  /**
   * Brings rights to `home`'s bucket, which a purchase of `needed` units found short: lands
   * every move in flight it finds, then moves units from the bucket with the most. Returns
   * null when the buyer is to buy again (units came to its bucket, or kept moving past
   * every read); else a refusal's count, confirmed: the units in all the buckets, every
   * bucket read twice over with nothing in flight and no move in between (0: SOLD_OUT;
   * fewer than `needed`: INSUFFICIENT_STOCK). Never a refusal from a count no read
   * confirmed, nor from reads before `since` (performance.now() when the purchase's attempt
   * began): one refill per home bucket and size runs at a time in this process, and a
   * purchase shares a running one only if it began after `since`; else it waits for it,
   * and refills afresh if it refused. Whatever a move's scripts answered, the buyer's own
   * purchase wrote nothing: a failure is REDIS_UNAVAILABLE, never OUTCOME_UNKNOWN (a move
   * whose reply was lost is in flight, logged on its source, and the next refill lands it).
   */
  async refill(home: Home, needed: number, since: number): Promise<number | null> {
    const id = `${home.bucketId}#${needed}`;
    const running = this.refills.get(id);
    if (running && running.startedAt >= since) return running.result;
    if (running) {
      // Begun before this purchase: its reads may be of an instant before it began.
      const left = await running.result.catch(() => 0);
      return left === null ? null : this.refill(home, needed, since);
    }
    const refill = {
      startedAt: performance.now(),
      result: this.refillOnce(home, needed)
        .catch((err: unknown) => {
          if (!(err instanceof OutcomeUnknownError)) throw err;
          throw new RedisUnavailableError(
            "a move of units to this buyer's bucket got no reply; nothing was written for this purchase; retry",
          );
        })
        .finally(() => {
          if (this.refills.get(id) === refill) this.refills.delete(id);
        }),
    };
    this.refills.set(id, refill);
    return refill.result;
  }

  private async refillOnce(home: Home, needed: number): Promise<number | null> {
    let returning = 0;
    // Bounded: a source found dry (or restarting) by the time it is asked is read again, a few times.
    for (let round = 1; round <= REFILL_ROUNDS; round++) {
      const read = await this.read(home.buckets);
      const flying = read.flatMap((b) => [...b.inFlight, ...b.stale]);
      if (flying.length > 0) {
        // Landed first, wherever they go (back to their source if refused); then read again.
        await Promise.all(flying.map((m) => this.land(m)));
        continue;
      }
      const mine = read.find((b) => b.id === home.bucketId)!;
      if (mine.stock >= needed) return null;
      const source = read.filter((b) => b.id !== home.bucketId && b.stock > 0).sort((a, b) => b.stock - a.stock)[0];
      if (!source) {
        // Short (or dry) everywhere, as read one bucket after another: said only if a second
        // read finds it so (confirmed()).
        const confirmed = await this.confirmed(home.buckets, read, needed);
        if (typeof confirmed === 'number') return confirmed;
        // Units back in several buckets between the reads, again: no read can show the
        // product short (nor that it is not), and another round costs every bucket two reads.
        if (confirmed === 'returns' && ++returning >= RETURNS_ROUNDS) throw new BucketsBusyError(round, 'returning');
        continue;
      }
      // Moved: the buyer buys again (what this one read adds up to was never confirmed).
      if ((await this.move(source.id, home.bucketId, needed - Math.max(mine.stock, 0))) > 0) return null;
    }
    // Units kept moving past every read: nothing confirmed, so nothing refused; the buyer buys again.
    return null;
  }

  /**
   * What a product of several buckets has in them, for its waiting room (queue-5.lua's
   * count); null for a product of one bucket (its queue reads its own stock). `first`
   * runs once the product is known to have several, before any bucket is read, and
   * returns the sale's epoch: every bucket must be of that sale (else `first` runs again).
   * The moves found in flight are landed first (a queue's buyers may never refill, so
   * nobody else would); one that cannot land now (REDIS_WAIT_REPLICAS with a replica
   * away) is left `moving`: its units not counted (read on its source and again landed,
   * they would count twice), and the product never counted as having none. A count is
   * trusted only when each bucket was read with no move through it meanwhile, and a second
   * read finds every bucket's moves and sale as the first: never more than the product
   * has, and 0 only when every bucket is dry at one instant (no unit back to any between
   * its reads, or to one only, read again alone: pinned()). Units that keep moving past every read are
   * BUCKETS_BUSY (503), never a guess.
   */
  async left(
    productId: string,
    first: () => Promise<string>,
    fresh = false,
  ): Promise<{ units: number; moving: boolean } | null> {
    const buckets = await this.buckets(productId, fresh);
    if (buckets.length === 1) return null;
    let epoch = await first();
    let returning = 0;
    for (let round = 1; round <= REFILL_ROUNDS; round++) {
      const read = await this.read(buckets);
      const flying = read.flatMap((b) => [...b.inFlight, ...b.stale]);
      const landed = await Promise.all(
        flying.map((m) =>
          this.land(m).then(
            () => true,
            () => false,
          ),
        ),
      );
      if (landed.some(Boolean)) continue;
      // Another sale began meanwhile (a PUT): counted afresh, from `first` on.
      if (read.some((b) => b.epoch !== epoch)) {
        epoch = await first();
        continue;
      }
      const again = await this.read(buckets);
      const still = (b: BucketRead, i: number) => b.steady && read[i].steady && b.version === read[i].version;
      if (again.every((b, i) => still(b, i) && b.epoch === epoch)) {
        const units = read.reduce((sum, b) => sum + Math.max(b.stock, 0), 0);
        const moving = flying.length > 0;
        // None is the door's SOLD_OUT (moves that could not land are not none): only if no
        // unit came back to a bucket between its reads, or to one only, pinned (as a
        // refusal: confirmed()). A unit back to a bucket read before another sold its last
        // would leave every bucket read at 0 with a unit in the product throughout.
        const back = returnedTo(read, again);
        if (units > 0 || moving || back.length === 0) return { units, moving };
        if (back.length === 1 && (await this.pinned(buckets, read, back[0]))?.bound === 0) return { units, moving };
        if (back.length > 1 && ++returning >= RETURNS_ROUNDS) throw new BucketsBusyError(round, 'returning');
      }
    }
    throw new BucketsBusyError(REFILL_ROUNDS, 'moving');
  }

  /**
   * A refusal's count for buckets `read` found short of `needed` (none in flight), if later
   * reads confirm one: else 'again' (read again), or 'returns' (units came back to several
   * buckets between the reads). It must hold at some instant of the purchase, the units in
   * every bucket at once, and the reads are one bucket after another (on different shards;
   * a pipeline is not atomic either). So a second read must find every bucket of the same
   * sale (its epoch: a restart raises stocks and moves no counter), read steady, with no
   * move through it (its version), nothing in flight and no more units; then no bucket
   * gained a unit between its reads except by a return (a cancel or an expiry: its
   * `returned`). With no return anywhere, each bucket held at most its first count at the
   * instant the last first read was done: the product held at most `read`'s total. With
   * returns to one bucket (units that come back and sell again, as at the end of a hot
   * sale), that bucket is read once more alone, then every other bucket again: those
   * unchanged since `read` held at most their first count at the instant of that one read
   * (pinned()). Returns to two buckets prove no instant: a unit back to one while the other
   * sold its last leaves each read at 0 with a unit in the product throughout, which reads
   * cannot tell from a product dry at each of them. The answer: 0 (SOLD_OUT) only when that
   * instant's bound is 0. Else INSUFFICIENT_STOCK's count: the second read's total (with
   * no source, only the home bucket holds units, read once no other had any), or the
   * pinned instant's bound; read again if the last reads found none (the product may have
   * sold out in between: a third read says so, or not). No count across shards is exact:
   * the one named is the most the product held at one instant, or very near it.
   */
  private async confirmed(
    buckets: readonly string[],
    read: readonly BucketRead[],
    needed: number,
  ): Promise<number | 'again' | 'returns'> {
    const again = await this.read(buckets);
    if (!again.every((b, i) => unmoved(read[i], b))) return 'again';
    const back = returnedTo(read, again);
    if (back.length > 1) return 'returns';
    const found =
      back.length === 0
        ? { bound: unitsIn(read), last: unitsIn(again), count: unitsIn(again) }
        : await this.pinned(buckets, read, back[0]);
    if (found === null || found.bound >= needed) return 'again';
    if (found.bound === 0) return 0;
    return found.last > 0 ? found.count : 'again';
  }

  /**
   * Bucket `k`, which took units back between two reads, read alone, then every other
   * bucket again: `bound`, the most the product held at the instant of that one read (its
   * count then, and each other bucket's count in `read`, unchanged since with no return:
   * none gained a unit in between), also its `count`; `last`, what these reads add up to.
   * Null when anything changed but `k`'s returns and the others' sales.
   */
  private async pinned(
    buckets: readonly string[],
    read: readonly BucketRead[],
    k: number,
  ): Promise<{ bound: number; last: number; count: number } | null> {
    const [one] = await this.read([buckets[k]]);
    const rest = await this.read(buckets.filter((_, i) => i !== k));
    const others = read.filter((_, i) => i !== k);
    if (!unmoved(read[k], one) || !rest.every((b, i) => unmoved(others[i], b)) || returnedTo(others, rest).length > 0)
      return null;
    const bound = unitsIn([one, ...others]);
    return { bound, last: unitsIn([one, ...rest]), count: bound };
  }

  /**
   * Moves up to `units` (or half the source's stock, if more) from `source` to
   * `destination`: out under the source's exclusion (no purchase of it between its read
   * and its write; under `fenced`, the step refuses if a later hold was issued), then
   * landed. The units moved (0: the source was dry, or the destination refused them).
   */
  async move(source: string, destination: string, units: number): Promise<number> {
    const id = randomUUID();
    const [status, moved, epoch] = await this.purchases.exclusive(source, (fence) =>
      moveOut.run(this.redis, moveOutKeys(this.keys.product(source)), id, destination, units, fence ?? ''),
    );
    if (status !== 'OUT') return 0;
    // The fault suite's stop: the units are in flight, logged on the source only.
    this.faults.reached('move-between');
    if ((await this.land({ id, source, destination, units: moved, epoch: epoch as string })) !== 'IN') return 0;
    this.moves++;
    return moved;
  }

  /**
   * Finishes a move in flight: in at its destination (at most once), then its record
   * closed on the source (its units back there if the destination refused them). With
   * REDIS_WAIT_REPLICAS, each step only once that many replicas have the one before: a
   * failover of the source that lost its first step would give it the units back while
   * they landed, and one of the destination that lost the landing, after the source's
   * record was closed, would lose them.
   */
  async land(m: InFlight): Promise<'IN' | 'STALE'> {
    await this.replicated(m.source);
    const landing = await moveIn.run(this.redis, moveInKeys(this.keys.product(m.destination)), m.id, m.units, m.epoch);
    if (landing === 'IN') await this.replicated(m.destination);
    const back = await moveDone.run(this.redis, moveDoneKeys(this.keys.product(m.source)), m.id, landing);
    if (back > 0)
      this.logger.warn(`move ${m.id}: ${m.destination} refused ${back} units of another sale; back in ${m.source}`);
    return landing;
  }

  /** REDIS_WAIT_REPLICAS: waits until that many replicas of `bucket`'s master have what was written there. */
  private async replicated(bucket: string): Promise<void> {
    if (!this.replicas.enabled) return;
    try {
      await this.replicas.confirm(bucket, true, await this.replicas.ensure(bucket, true));
    } catch {
      throw new RedisUnavailableError(
        `units moving to this buyer's bucket are not on ${this.replicas.required} replicas of ${bucket}'s master yet; nothing was written for this purchase; retry`,
      );
    }
  }

  /** Units in flight between a product's buckets now, and each bucket's stock, for GET. */
  async read(buckets: readonly string[]): Promise<BucketRead[]> {
    return Promise.all(
      buckets.map(async (id) => {
        const k = this.keys.product(id);
        // A pipeline of reads, not a MULTI: answered while Redis refuses writes for memory.
        const [before, [returned, epochBefore], stock, epoch, moves] = (await execAll(
          this.redis
            .pipeline()
            .hget(k.moves, 'v')
            .hmget(k.meta, 'unitsReturned', 'epoch')
            .get(k.stock)
            .hget(k.meta, 'epoch')
            .hgetall(k.moves),
        )) as [string | null, (string | null)[], string | null, string | null, Record<string, string>];
        const all: InFlight[] = loggedMoves(moves).map((m) => ({ ...m, source: id }));
        return {
          id,
          stock: Number(stock ?? 0),
          version: moves.v ?? '0',
          returned,
          steady: (before ?? '0') === (moves.v ?? '0') && epochBefore === epoch,
          epoch,
          inFlight: all.filter((m) => m.epoch === epoch),
          stale: all.filter((m) => m.epoch !== epoch),
        };
      }),
    );
  }
}

/**
 * Whether bucket `later` gained no unit since `first` but by a return (both of the same
 * sale, read steady, no move through it, nothing in flight, no more units than `first`).
 */
function unmoved(first: BucketRead, later: BucketRead): boolean {
  return (
    later.epoch === first.epoch &&
    later.steady &&
    first.steady &&
    later.version === first.version &&
    later.inFlight.length + later.stale.length === 0 &&
    Math.max(later.stock, 0) <= Math.max(first.stock, 0)
  );
}

/**
 * The buckets (their indexes) that may have taken units back between two reads: their
 * returns count moved, or is not kept (a sale begun before it was: unknown is changed).
 */
function returnedTo(first: readonly BucketRead[], later: readonly BucketRead[]): number[] {
  return later.flatMap((b, i) => (b.returned !== null && b.returned === first[i].returned ? [] : [i]));
}

/** The units in buckets as read: their stock (none below 0) and every move logged in flight. */
function unitsIn(read: readonly BucketRead[]): number {
  return read.reduce(
    (sum, b) => sum + Math.max(b.stock, 0) + [...b.inFlight, ...b.stale].reduce((s, m) => s + m.units, 0),
    0,
  );
}
