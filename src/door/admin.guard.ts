import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { DOOR_CONFIG, DoorConfig } from './door.config';
import { UnauthorizedError } from '../errors/errors';

/**
 * Admin routes need `Authorization: Bearer <ADMIN_TOKEN>`. Both sides are hashed to
 * a fixed length before a constant-time compare, so neither the token's content nor
 * its length leaks through response timing.
 */
@Injectable()
export class AdminGuard implements CanActivate {
  private readonly expected: Buffer;

  constructor(@Inject(DOOR_CONFIG.token) config: DoorConfig) {
    this.expected = sha256(config.adminToken);
  }

  canActivate(context: ExecutionContext): boolean {
    if (!this.admits(context.switchToHttp().getRequest<FastifyRequest>().headers.authorization)) {
      throw new UnauthorizedError();
    }
    return true;
  }

  /** Whether an Authorization header carries the admin token (PaymentGuard asks too). */
  admits(header = ''): boolean {
    const match = /^Bearer (.+)$/.exec(header);
    const given = sha256(match?.[1] ?? '');
    // Compare even when the header is malformed, so that case takes the same time.
    return timingSafeEqual(given, this.expected) && match !== null;
  }
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}
