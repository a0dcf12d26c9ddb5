import { Controller, Get, HttpStatus, Inject, Res } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import type { RedisClient } from '../redis/create-client';
import { AppConfig, UNSAFE_STRATEGIES } from '../config/app-config';
import { APP_CONFIG } from '../config/config.constants';
import { component } from '../docs/components';
import { PurchasePath } from '../orders/purchases/purchase-path';
import { REDIS_CLIENT } from '../redis/redis.constants';
import { HEALTH_SCHEMA } from './health.schema';
import { redisStatus } from './redis-status';

const HEALTH = component('Health', HEALTH_SCHEMA);

@ApiTags('health')
@Controller('health')
export class HealthController {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: RedisClient,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly purchases: PurchasePath,
  ) {}

  /**
   * 200 when Redis answers PING (on a cluster: every slot is served and every master
   * answers; each master is listed) and, for Redlock, a majority of its lock nodes do;
   * 503 otherwise. Says which strategy is running.
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
    const [{ redis, cluster }, { lostLocks, lockNodes }] = await Promise.all([
      redisStatus(this.redis),
      this.purchases.status(),
    ]);
    const { faultStopAt } = this.config;
    const ok = redis === 'up' && (!lockNodes || lockNodes.up >= lockNodes.quorum);
    if (!ok) void reply.status(HttpStatus.SERVICE_UNAVAILABLE).header('Retry-After', '1');
    return {
      status: ok ? 'ok' : 'unavailable',
      redis,
      ...(cluster ? { cluster } : {}),
      ...(lockNodes ? { lockNodes } : {}),
      strategy: this.config.lockStrategy,
      // An unsafe strategy, or the fault suite's self-stop hook: either way not for a real sale.
      unsafe: UNSAFE_STRATEGIES.includes(this.config.lockStrategy) || faultStopAt !== null,
      ...(faultStopAt ? { faultStopAt: `${faultStopAt.point}:${faultStopAt.nth}` } : {}),
      lostLocks,
    };
  }
}
