import { Controller, Get, HttpStatus, Inject, Res } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Cluster } from 'ioredis';
import type { RedisClient } from '../redis/create-client';
import { AppConfig, strategyFamily, UNSAFE_STRATEGIES } from '../config/app-config';
import { APP_CONFIG } from '../config/config.constants';
import { component } from '../docs/components';
import { PurchasePath } from '../orders/purchases/purchase-path';
import { StrategyMismatches } from '../orders/strategy-mismatches';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { HEALTH_SCHEMA } from './health.schema';
import { redisStatus, RedisStatus } from './redis-status';

const HEALTH = component('Health', HEALTH_SCHEMA);

/**
 * On a cluster, how long one look at every master (CLUSTER SHARDS, CLUSTER INFO, an
 * INFO per master) answers /health: a probe, a dashboard and a curious client asking
 * at once, or a client asking in a loop, cost the cluster one fan-out per second.
 */
export const CLUSTER_STATUS_TTL_MS = 1_000;

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly purchases: PurchasePath,
    private readonly mismatches: StrategyMismatches,
  ) {}

  private clusterStatus?: { readonly at: number; readonly status: Promise<RedisStatus> };

  /** Standalone: asked each time (one INFO). Cluster: one shared look per CLUSTER_STATUS_TTL_MS. */
  private redisStatus(): Promise<RedisStatus> {
    const allow = this.config.redisAllowEviction;
    if (!(this.redis instanceof Cluster)) return redisStatus(this.redis, allow);
    const now = performance.now();
    if (!this.clusterStatus || now - this.clusterStatus.at >= CLUSTER_STATUS_TTL_MS) {
      this.clusterStatus = { at: now, status: redisStatus(this.redis, allow) };
    }
    return this.clusterStatus.status;
  }

  /**
   * 200 when Redis answers and would take a write now (no eviction policy that may lose
   * the sale's keys, not a read-only replica, not out of memory, not failing to
   * persist: `problems`; on a cluster every slot is served and every master answers and
   * has none, each master listed) and, for Redlock, a majority of its lock nodes
   * answer; 503 otherwise. Says which strategy runs, and the products it refuses lately
   * because another strategy family sells them.
   */
  @Get()
  @ApiOperation({ summary: "whether this instance can sell: Redis (and Redlock's nodes) answer" })
  @ApiResponse({ status: 200, description: 'Redis answers', schema: HEALTH })
  @ApiResponse({
    status: 503,
    description:
      'Redis does not answer PING, or fewer than a quorum of Redlock nodes do: the same body, `status: "unavailable"`',
    headers: { 'Retry-After': { description: 'seconds to wait before asking again', schema: { type: 'integer' } } },
    schema: HEALTH,
  })
  async check(@Res({ passthrough: true }) reply: FastifyReply) {
    const [{ redis, problems, cluster }, { lostLocks, lockNodes }] = await Promise.all([
      this.redisStatus(),
      this.purchases.status(),
    ]);
    const mismatched = this.mismatches.recent();
    const { faultStopAt } = this.config;
    const ok = redis === 'up' && (!lockNodes || lockNodes.up >= lockNodes.quorum);
    if (!ok) void reply.status(HttpStatus.SERVICE_UNAVAILABLE).header('Retry-After', '1');
    return {
      status: ok ? 'ok' : 'unavailable',
      redis,
      ...(problems && problems.length > 0 ? { problems } : {}),
      ...(cluster ? { cluster } : {}),
      ...(lockNodes ? { lockNodes } : {}),
      strategy: this.config.lockStrategy,
      strategyFamily: strategyFamily(this.config.lockStrategy),
      ...(mismatched.length > 0 ? { strategyMismatch: mismatched } : {}),
      // An unsafe strategy, or the fault suite's self-stop hook: either way not for a real sale.
      unsafe: UNSAFE_STRATEGIES.includes(this.config.lockStrategy) || faultStopAt !== null,
      ...(faultStopAt ? { faultStopAt: `${faultStopAt.point}:${faultStopAt.nth}` } : {}),
      lostLocks,
    };
  }
}
