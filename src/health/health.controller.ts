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

  /**
   * 200 when Redis answers PING (and, for Redlock, a majority of its lock nodes do),
   * 503 otherwise; says which strategy is running.
   */
  @Get()
  async check(@Res({ passthrough: true }) reply: FastifyReply) {
    const [redis, lockNodes] = await Promise.all([
      this.redis.ping().then(
        () => 'up' as const,
        () => 'down' as const,
      ),
      this.lock.kind === 'lock' ? this.lock.lockNodes?.() : undefined,
    ]);
    const ok = redis === 'up' && (!lockNodes || lockNodes.up >= lockNodes.quorum);
    if (!ok) reply.status(HttpStatus.SERVICE_UNAVAILABLE).header('Retry-After', '1');
    return {
      status: ok ? 'ok' : 'unavailable',
      redis,
      ...(lockNodes ? { lockNodes } : {}),
      strategy: this.lock.name,
      unsafe: this.lock.unsafe,
      lostLocks: this.lock.lostLocks,
    };
  }
}
