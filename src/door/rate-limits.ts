import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RateLimit } from '../config/app-config';
import type { RedisClient } from '../redis/create-client';

export type RateScope = 'ip' | 'user';

/** A refusal: the headers a 429 carries, and the numbers its message says. */
export interface RateRefusal {
  readonly scope: RateScope;
  readonly limit: RateLimit;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * One limit (per IP or per user), kept in Redis by rate-limiter-flexible's
 * RateLimiterRedis: a fixed window per key, counted by one Lua script (SET NX EX, then
 * INCRBY and PTTL) on one key, so it is atomic, shared by every instance, and legal on
 * a Redis Cluster (one key per call, no hash tag needed). Keys:
 * `<KEY_PREFIX>rate:<scope>:<client address or user id>`, each expiring with its window.
 */
export class RateLimits {
  private readonly limiter: RateLimiterRedis;
  /** draft-ietf-httpapi-ratelimit-headers-10's RateLimit-Policy: the same for every refusal of this scope. */
  private readonly policy: string;

  constructor(
    redis: RedisClient,
    keyPrefix: string,
    readonly scope: RateScope,
    readonly limit: RateLimit,
  ) {
    this.limiter = new RateLimiterRedis({
      storeClient: redis,
      keyPrefix: `${keyPrefix}rate:${scope}`,
      points: limit.count,
      duration: limit.windowMs / 1_000,
      // Once Redis has said a key is over for this window, this instance refuses it
      // from memory until the window ends (the end Redis gave), instead of asking
      // again: a flooding client costs no Redis call. The count itself stays Redis's.
      inMemoryBlockOnConsumed: limit.count + 1,
    });
    // Structured fields (RFC 9651): a List of one Item, the policy's name, with its
    // quota `q` and window `w` in seconds.
    this.policy = `"${scope}";q=${limit.count};w=${limit.windowMs / 1_000}`;
  }

  /**
   * Counts one request for `key`: null if it is within the limit, else the refusal.
   * A Redis that does not answer rejects (the caller answers 503, fails closed).
   */
  async take(key: string): Promise<RateRefusal | null> {
    try {
      await this.limiter.consume(key);
      return null;
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      // Whole seconds, rounded up: a client that waits that long finds a new window.
      const seconds = String(Math.max(1, Math.ceil(err.msBeforeNext / 1_000)));
      return {
        scope: this.scope,
        limit: this.limit,
        headers: {
          'retry-after': seconds,
          'ratelimit-policy': this.policy,
          ratelimit: `"${this.scope}";r=${err.remainingPoints};t=${seconds}`,
        },
      };
    }
  }
}
