import { Inject, Injectable } from '@nestjs/common';
import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'ioredis';
import { REDIS_CONFIG, RedisConfig } from '../redis/redis.config';
import { OutcomeUnknownError, RedisUnavailableError } from '../errors/errors';
import type { RedisClient } from '../redis/create-client';
import { KeyLayout } from '../redis/key-layout';
import { REDIS_CLIENT } from '../redis/redis.constants';

/** How long a master's count of live replicas is trusted before it is read again. */
const REPLICAS_FRESH_MS = 1_000;
/**
 * A replica counts as live while it acknowledged within this many seconds (INFO's
 * `lag`; replicas acknowledge every second): one that stopped answering drops out
 * within about two seconds instead of stalling every order on its master.
 */
const MAX_LAG_S = 2;
/** How long the mark that WAIT waits for lives: it only has to be replicated once. */
const MARK_TTL_MS = 1_000;

/**
 * REDIS_WAIT_REPLICAS: an order is answered 201 only once that many replicas of the
 * product's master have it. Redis replicates asynchronously: a master that dies right
 * after a write may take it along, and the replica promoted in its place has never seen
 * it, so a buyer told 201 would hold an order that no longer exists and its unit would
 * be sold again. redis.io is explicit that WAIT narrows this but does not make Redis
 * strongly consistent (a replica that acknowledged may still lose the race to be promoted).
 *
 * - Before the purchase, `ensure` refuses it (503 REDIS_UNAVAILABLE, nothing written)
 *   when the product's master is known to have fewer live replicas than asked: after a
 *   failover, until the old master is back as a replica, every WAIT there would wait
 *   the whole timeout, holding the one connection every buyer of that master shares.
 *   With an Idempotency-Key it runs after the key's lookup: a retry whose order some
 *   replicas acknowledged (noted beside the key) is answered it again without a WAIT;
 *   one whose order none is known to have is confirmed now, or told OUTCOME_UNKNOWN.
 * - After it, `confirm` writes a short-lived mark on the product's slot and sends WAIT
 *   behind it on the same connection. WAIT waits for the replicas to reach the
 *   replication offset of its connection's last write, and the master's offset is one
 *   sequence: the mark comes after the order, whichever connection wrote the order (the
 *   shared client, optimistic's WATCH connection, another instance for a replay).
 *   Too few acknowledgements in time: the order is on the master and may or may not
 *   survive a failover, so the buyer hears OUTCOME_UNKNOWN.
 *
 * WAIT blocks the connection it is sent on until the replicas answer, and the commands
 * of every other buyer of that master queue behind it: a replica round trip per order.
 */
@Injectable()
export class ReplicaAcks {
  private readonly replicas: number;
  private readonly timeoutMs: number;
  /** Per master (`host:port`; '' standalone): its live replicas, as last read, and when. */
  private readonly known = new Map<string, { count: Promise<number>; at: number }>();

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
    @Inject(REDIS_CONFIG.token) config: RedisConfig,
  ) {
    this.replicas = config.redisWaitReplicas;
    this.timeoutMs = config.redisWaitTimeoutMs;
  }

  get enabled(): boolean {
    return this.replicas > 0;
  }

  /** REDIS_WAIT_REPLICAS: how many replicas must acknowledge an order. */
  get required(): number {
    return this.replicas;
  }

  /**
   * Throws when `productId`'s master has too few live replicas: REDIS_UNAVAILABLE
   * (nothing written) before a purchase, OUTCOME_UNKNOWN for an order `written` earlier
   * that no replica is known to have. Returns that master (`host:port`, '' standalone),
   * for `confirm`.
   */
  async ensure(productId: string, written = false): Promise<string> {
    if (this.replicas === 0) return '';
    const key = this.keys.product(productId).meta;
    const node = this.nodeOf(key);
    const live = await this.liveReplicas(key, node);
    if (live >= this.replicas) return node;
    const lacking = `the product's Redis master has ${live} live replica${live === 1 ? '' : 's'} and REDIS_WAIT_REPLICAS asks for ${this.replicas}`;
    if (written) {
      throw new OutcomeUnknownError(
        `the order was written earlier, but no replica is known to have it and ${lacking}: a failover may lose it; ` +
          'retry with the same Idempotency-Key once the replicas are back to learn whether it stands',
      );
    }
    throw new RedisUnavailableError(`${lacking}: nothing was written; retry later`);
  }

  /**
   * WAIT on the master that serves `productId` (a pipeline with one of the product's
   * keys goes there). Throws OUTCOME_UNKNOWN when fewer than REDIS_WAIT_REPLICAS
   * replicas acknowledged within REDIS_WAIT_TIMEOUT_MS. `withKey`: whether the buyer
   * sent an Idempotency-Key, which decides what a retry can do.
   */
  async confirm(productId: string, withKey: boolean, master: string): Promise<void> {
    if (this.replicas === 0) return;
    const k = this.keys.product(productId);
    let count = 0;
    // Only on the master that `ensure` saw: after a failover in between, the new master's
    // replicas acknowledging the mark say nothing of an order the old one may have taken along.
    if (this.nodeOf(k.meta) === master) {
      const replies = await this.redis
        .pipeline()
        .set(k.replicated, '1', 'PX', MARK_TTL_MS)
        .wait(this.replicas, this.timeoutMs)
        .exec();
      // No mark written (MOVED, ASK mid-migration): WAIT would count nothing of this order.
      const [markErr] = replies?.[0] ?? [new Error('SET got no reply')];
      const [err, acknowledged] = replies?.[1] ?? [new Error('WAIT got no reply'), 0];
      count = markErr || err ? 0 : Number(acknowledged);
    }
    if (count >= this.replicas) return;
    throw new OutcomeUnknownError(
      `the order was written to Redis but only ${count} of the ${this.replicas} replicas REDIS_WAIT_REPLICAS ` +
        `asks for acknowledged it within ${this.timeoutMs} ms: a failover may lose it; ` +
        (withKey
          ? 'retry with the same Idempotency-Key to learn whether it stands'
          : 'only a retry with an Idempotency-Key could tell whether it stands (a retry without one may buy a second time)'),
    );
  }

  private nodeOf(key: string): string {
    const client = this.redis;
    return client instanceof Cluster ? (client.slots[calculateSlot(key)]?.[0] ?? '?') : '';
  }

  private liveReplicas(key: string, node: string): Promise<number> {
    const client = this.redis;
    const cached = this.known.get(node);
    if (cached && performance.now() - cached.at < REPLICAS_FRESH_MS) return cached.count;
    // INFO is keyless; in a pipeline behind a key of the slot it goes to that slot's master.
    const count = client
      .pipeline()
      .exists(key)
      .info('replication')
      .exec()
      .then((replies) => {
        const [err, info] = replies?.[1] ?? [new Error('INFO got no reply'), ''];
        if (err) throw err;
        return liveReplicasIn(String(info));
      });
    this.known.set(node, { count, at: performance.now() });
    // A failed read is not remembered: the next buyer asks again.
    count.catch(() => this.known.delete(node));
    return count;
  }
}

/** Replicas INFO replication lists as online and acknowledging (`slaveN:...,state=online,...,lag=N`). */
export function liveReplicasIn(info: string): number {
  let live = 0;
  for (const line of info.split(/\r?\n/)) {
    if (!/^slave\d+:/.test(line)) continue;
    const fields = Object.fromEntries(
      line
        .slice(line.indexOf(':') + 1)
        .split(',')
        .map((kv) => kv.split('=') as [string, string]),
    );
    if (fields.state === 'online' && Number(fields.lag) <= MAX_LAG_S) live++;
  }
  return live;
}
