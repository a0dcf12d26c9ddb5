import { Controller, Get, HttpStatus, Inject, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Redis } from 'ioredis';
import { LOCK_STRATEGY, PurchaseStrategy } from '../locks/lock-strategy';
import { REDIS_CLIENT } from '../redis/redis.constants';

@Controller('health')
export class HealthController {
  constructor(
    @Inject(REDIS_CLIENT) private readonly redis: Redis,
    @Inject(LOCK_STRATEGY) private readonly lock: PurchaseStrategy,
  ) {}

  /** 200 when Redis answers PING, 503 otherwise; says which strategy is running. */
  @Get()
  async check(@Res({ passthrough: true }) reply: FastifyReply) {
    const redis = await this.redis.ping().then(
      () => 'up' as const,
      () => 'down' as const,
    );
    if (redis === 'down') reply.status(HttpStatus.SERVICE_UNAVAILABLE).header('Retry-After', '1');
    return {
      status: redis === 'up' ? 'ok' : 'unavailable',
      redis,
      strategy: this.lock.name,
      unsafe: this.lock.unsafe,
      lostLocks: this.lock.lostLocks,
    };
  }
}
