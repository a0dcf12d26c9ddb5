import { Inject, Injectable } from '@nestjs/common';
import type { Redis } from 'ioredis';
import { AppConfig } from '../config/app-config';
import { APP_CONFIG } from '../config/config.constants';
import { OutcomeUnknownError } from '../errors/errors';
import type { RedisClient } from '../redis/create-client';
import { KeyLayout } from '../redis/key-layout';
import { REDIS_CLIENT } from '../redis/redis.constants';

/**
 * REDIS_WAIT_REPLICAS: an order is answered 201 only once that many replicas of the
 * product's master have acknowledged it. Redis replicates asynchronously: a master that
 * dies right after a write may take it along, and the replica promoted in its place has
 * never seen it, so a buyer told 201 would hold an order that no longer exists and its
 * unit would be sold again. WAIT (sent on the connection that carried the write, so it
 * covers it) closes most of that window. It blocks that connection until the replicas
 * answer, and every buyer's command to the same master queues behind it: the price is
 * a replica round trip per order, or REDIS_WAIT_TIMEOUT_MS while a replica is down; redis.io is explicit that it does not make
 * Redis strongly consistent (a replica that acknowledged may still lose the race to be
 * promoted). When too few replicas answer in time, the order was written to the master
 * and may or may not survive a failover: the buyer hears OUTCOME_UNKNOWN, and a retry
 * with the same Idempotency-Key finds out which.
 */
@Injectable()
export class ReplicaAcks {
  private readonly replicas: number;
  private readonly timeoutMs: number;

  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    private readonly keys: KeyLayout,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.replicas = config.redisWaitReplicas;
    this.timeoutMs = config.redisWaitTimeoutMs;
  }

  get enabled(): boolean {
    return this.replicas > 0;
  }

  /**
   * WAIT on the master that serves `productId` (a pipeline with one of the product's
   * keys goes there, on the connection its writes used). Throws OUTCOME_UNKNOWN when
   * fewer than REDIS_WAIT_REPLICAS replicas acknowledged within REDIS_WAIT_TIMEOUT_MS.
   */
  async confirm(productId: string): Promise<void> {
    if (this.replicas === 0) return;
    const replies = await this.redis
      .pipeline()
      .exists(this.keys.product(productId).meta)
      .wait(this.replicas, this.timeoutMs)
      .exec();
    const [err, acknowledged] = replies?.[1] ?? [new Error('WAIT got no reply'), 0];
    this.check(err ? 0 : Number(acknowledged));
  }

  /**
   * WAIT on `connection`, for a write made on a connection of its own (optimistic's
   * WATCH ... EXEC): WAIT counts only the writes of the connection it is sent on.
   */
  async confirmOn(connection: Pick<Redis, 'wait'>): Promise<void> {
    if (this.replicas === 0) return;
    this.check(await connection.wait(this.replicas, this.timeoutMs).catch(() => 0));
  }

  private check(acknowledged: number): void {
    if (acknowledged >= this.replicas) return;
    throw new OutcomeUnknownError(
      `the order was written to Redis but only ${acknowledged} of the ${this.replicas} replicas ` +
        `REDIS_WAIT_REPLICAS asks for acknowledged it within ${this.timeoutMs} ms: a failover may lose it; ` +
        'retry with the same Idempotency-Key to learn whether it stands',
    );
  }
}
