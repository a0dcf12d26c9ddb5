import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RateLimit } from './door.config';
import type { RedisClient } from '../redis/create-client';

export type RateScope = 'ip' | 'user';

/**
 * rate-limiter-flexible's own script (SET NX, INCRBY, PTTL on one key, and a TTL for a
 * key found without one) with the window in ms (PX, PEXPIRE) instead of seconds.
 * KEYS[1] the count; ARGV[1] points to add, ARGV[2] the window in ms. Returns
 * {count, PTTL}.
 */
const WINDOW_MS_SCRIPT = `
redis.call('set', KEYS[1], 0, 'PX', ARGV[2], 'NX')
local consumed = redis.call('incrby', KEYS[1], ARGV[1])
local ttl = redis.call('pttl', KEYS[1])
if ttl == -1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {consumed, ttl}
`;

/** A refusal: the headers a 429 carries, and the numbers its message says. */
export interface RateRefusal {
  readonly scope: RateScope;
  readonly limit: RateLimit;
  readonly headers: Readonly<Record<string, string>>;
}

/**
 * One limit (per IP or per user), kept in Redis by rate-limiter-flexible's
 * RateLimiterRedis: a fixed window per key, counted by one Lua script (SET NX PX, then
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
      // In ms, not the seconds the library expects: it multiplies `duration` by 1000 and
      // floors it to whole seconds before it hands it to its script (EX), which turned a
      // 1500 ms window into 1 s and one under a second into a key that never expired.
      // Given ms, that whole number is the window in ms, which WINDOW_MS_SCRIPT sets
      // with PX. Its replies are Redis's own (the count, PTTL), so nothing else changes.
      duration: limit.windowMs,
      customIncrTtlLuaScript: WINDOW_MS_SCRIPT,
      // Once Redis has said a key is over for this window, this instance refuses it
      // from memory until the window ends (the end Redis gave), instead of asking
      // again: a flooding client costs no Redis call. The count itself stays Redis's.
      inMemoryBlockOnConsumed: limit.count + 1,
    });
    // Structured fields (RFC 9651): a List of one Item, the policy's name, with its
    // quota `q` and window `w` in whole seconds; `w` is optional, and left out of a
    // window it cannot state (500ms, 1500ms).
    const seconds = limit.windowMs % 1_000 === 0 ? `;w=${limit.windowMs / 1_000}` : '';
    this.policy = `"${scope}";q=${limit.count}${seconds}`;
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
