import { Logger } from '@nestjs/common';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RedisConfig } from '../redis/redis.config';
import type { DoorConfig } from './door.config';
import { BurstLog } from '../errors/burst-log';
import { errorBody } from '../errors/error-body';
import {
  AppError,
  BuyerTokenRequiredError,
  InternalError,
  RateLimitedError,
  RedisUnavailableError,
  UserMismatchError,
} from '../errors/errors';
import type { RedisClient } from '../redis/create-client';
import type { Metrics } from '../telemetry/metrics';
import { redisRefusal } from '../redis/redis-errors';
import { BuyerAuth } from './buyer-auth';
import { isDoorRoute } from './door-routes';
import { RateLimits, RateRefusal } from './rate-limits';

declare module 'fastify' {
  interface FastifyRequest {
    /** With BUYER_AUTH, on the door's routes: the verified buyer (the token's `sub`); else null. */
    buyer: string | null;
  }
}

/**
 * Rate limits and buyer tokens on the door's routes (door-routes.ts), as Fastify
 * route hooks: the per-IP limit, the token and (with a token) the per-user limit in
 * `onRequest`, before the body is read, parsed, validated or routed into Nest, so a
 * refused flood costs a Redis call (or none: rate-limits.ts) and no parsing. Without a
 * token the buyer is only known from the body: that per-user limit, and the check that
 * a token's buyer buys as themselves, run in `preHandler`, after validation.
 *
 * Called after NestFactory.create and before app.init(), when Nest registers its
 * routes: the onRoute hook sees each one.
 */
export async function installDoorChecks(
  fastify: FastifyInstance,
  config: DoorConfig & Pick<RedisConfig, 'keyPrefix'>,
  redis: RedisClient,
  metrics?: Pick<Metrics, 'doorRefused' | 'redisError'>,
): Promise<void> {
  const perIp = config.rateLimitPerIp && new RateLimits(redis, config.keyPrefix, 'ip', config.rateLimitPerIp);
  const perUser = config.rateLimitPerUser && new RateLimits(redis, config.keyPrefix, 'user', config.rateLimitPerUser);
  const auth = config.buyerAuth && (await BuyerAuth.create(config.buyerAuth));
  // Always there, so a route can read it whatever is configured (null: no token checked).
  fastify.decorateRequest('buyer', null);
  if (!perIp && !perUser && !auth) return;
  const logger = new Logger('Door');
  const trouble = new BurstLog((line) => logger.error(line));
  /** Every refusal, counted by code (seckill_door_refusals_total), then answered. */
  const answer = (reply: FastifyReply, err: AppError, headers?: Readonly<Record<string, string>>) => {
    metrics?.doorRefused(err.code);
    if (err.code === 'REDIS_UNAVAILABLE') metrics?.redisError('unavailable');
    return refuse(reply, err, headers);
  };

  /**
   * A limit Redis cannot count is refused, 503 REDIS_UNAVAILABLE (fails closed): a
   * purchase needs that Redis anyway, and on a cluster the limiter's key and the
   * product's may live on different nodes, so failing open could sell past the limit.
   */
  const limitFailed = (reply: FastifyReply, scope: string, err: unknown) => {
    const known = redisRefusal(err) ?? new RedisUnavailableError();
    trouble.say(`rate-limit:${known.code}`, `the ${scope} rate limit could not be counted in Redis: ${String(err)}`);
    return answer(reply, known);
  };
  const take = async (limits: RateLimits, key: string, reply: FastifyReply) => {
    let refused: RateRefusal | null;
    try {
      refused = await limits.take(key);
    } catch (err) {
      return limitFailed(reply, limits.scope, err);
    }
    if (refused === null) return null;
    return answer(
      reply,
      new RateLimitedError(refused.scope, refused.limit.count, refused.limit.windowMs),
      refused.headers,
    );
  };

  const onRequest = async (request: FastifyRequest, reply: FastifyReply) => {
    if (perIp) {
      // request.ip: the socket's peer, or the client TRUST_PROXY's proxies name.
      const refused = await take(perIp, request.ip, reply);
      if (refused) return refused;
    }
    if (!auth) return;
    try {
      request.buyer = await auth.buyerOf(request.headers.authorization);
    } catch (err) {
      if (err instanceof AppError) return answer(reply, err);
      trouble.say('buyer-auth', `a buyer token could not be checked: ${String(err)}`);
      return answer(reply, new InternalError());
    }
    if (perUser) {
      const refused = await take(perUser, request.buyer, reply);
      if (refused) return refused;
    }
  };

  const preHandler = async (request: FastifyRequest, reply: FastifyReply) => {
    // A body the route's schema refused goes on to the pipe (schema-checked.ts), which
    // answers 400: it is no one's request, so it counts for no user.
    if (request.validationError !== undefined) return;
    const userId = (request.body as { userId?: unknown } | undefined)?.userId;
    if (typeof userId !== 'string') return;
    if (auth) {
      if (userId !== request.buyer) return answer(reply, new UserMismatchError(userId));
      return;
    }
    if (perUser) {
      const refused = await take(perUser, userId, reply);
      if (refused) return refused;
    }
  };
  const checksBody = auth !== null || perUser !== null;

  fastify.addHook('onRoute', (route) => {
    const methods = [route.method].flat();
    if (!methods.some((method) => isDoorRoute(method, route.url))) return;
    route.onRequest = [onRequest, ...[route.onRequest ?? []].flat()];
    if (checksBody) route.preHandler = [preHandler, ...[route.preHandler ?? []].flat()];
  });
}

/** The body every error has; the headers a refusal of its kind carries. */
function refuse(reply: FastifyReply, err: AppError, headers: Readonly<Record<string, string>> = {}): FastifyReply {
  void reply.code(err.status).headers(headers);
  // RFC 6750 3: a 401 names the scheme it wants, and why the token given is not it.
  if (err.status === 401) {
    void reply.header(
      'www-authenticate',
      err instanceof BuyerTokenRequiredError ? 'Bearer realm="buyers"' : 'Bearer realm="buyers", error="invalid_token"',
    );
  }
  if (err.status === 503) void reply.header('retry-after', '1');
  return reply.send(errorBody(err));
}
