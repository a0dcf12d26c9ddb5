import type { RedisClient } from './create-client';

/**
 * The oldest Redis the app runs on: 7.0, for sharded pub/sub (SPUBLISH/SSUBSCRIBE),
 * which carries the lock release message standalone and on a cluster. On Redis 6 every
 * release would fail after the purchase's write, so the app refuses to start instead.
 */
export const MIN_REDIS_VERSION = [7, 0] as const;

/** `redis_version` from INFO's server section, as [major, minor, patch]; null if it has none. */
export function parseRedisVersion(info: string): [number, number, number] | null {
  const match = /^redis_version:(\d+)\.(\d+)(?:\.(\d+))?/m.exec(info);
  return match ? [Number(match[1]), Number(match[2]), Number(match[3] ?? 0)] : null;
}

/** Why the Redis that sent this INFO will not do, or null if it will. */
export function redisVersionProblem(info: string): string | null {
  const version = parseRedisVersion(info);
  const [needMajor, needMinor] = MIN_REDIS_VERSION;
  const needed = `seckill needs Redis ${needMajor}.${needMinor} or newer (SPUBLISH/SSUBSCRIBE for the lock release message)`;
  if (!version) return `Redis did not say its version (no redis_version in INFO): ${needed}`;
  const [major, minor] = version;
  if (major > needMajor || (major === needMajor && minor >= needMinor)) return null;
  return `Redis ${version.join('.')} is too old: ${needed}`;
}

/**
 * Asks one node (on a cluster, any master: a cluster runs one version, save during a
 * rolling upgrade) for its version; null if it will do.
 */
export async function checkRedisVersion(client: RedisClient): Promise<string | null> {
  return redisVersionProblem(await client.info('server'));
}
