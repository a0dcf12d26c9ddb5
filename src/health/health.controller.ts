import { Controller, Get, HttpStatus, Inject, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Redis } from 'ioredis';
import { AppConfig, UNSAFE_STRATEGIES } from '../config/app-config';
import { APP_CONFIG } from '../config/config.constants';
import { PurchasePath } from '../orders/purchases/purchase-path';
import { REDIS_CLIENT } from '../redis/redis.constants';

@Controller('health')
export class HealthController {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: Redis,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly purchases: PurchasePath,
  ) {}

  /**
   * 200 when Redis answers PING (and, for Redlock, a majority of its lock nodes do),
   * 503 otherwise; says which strategy is running.
   */
  @Get()
  async check(@Res({ passthrough: true }) reply: FastifyReply) {
    const [redis, { lostLocks, lockNodes }] = await Promise.all([
      this.redis.ping().then(
        () => 'up' as const,
        () => 'down' as const,
      ),
      this.purchases.status(),
    ]);
    const { faultStopAt } = this.config;
    const ok = redis === 'up' && (!lockNodes || lockNodes.up >= lockNodes.quorum);
    if (!ok) void reply.status(HttpStatus.SERVICE_UNAVAILABLE).header('Retry-After', '1');
    return {
      status: ok ? 'ok' : 'unavailable',
      redis,
      ...(lockNodes ? { lockNodes } : {}),
      strategy: this.config.lockStrategy,
      // An unsafe strategy, or the fault suite's self-stop hook: either way not for a real sale.
      unsafe: UNSAFE_STRATEGIES.includes(this.config.lockStrategy) || faultStopAt !== null,
      ...(faultStopAt ? { faultStopAt: `${faultStopAt.point}:${faultStopAt.nth}` } : {}),
      lostLocks,
    };
  }
}
