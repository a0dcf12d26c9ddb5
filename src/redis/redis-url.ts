import { ConfigError } from '../settings/setting';

/** A redis:// or rediss:// URL in the variable `name` (REDIS_URL, an entry of REDLOCK_URLS or of REDIS_CLUSTER_NODES). */
export function checkRedisUrl(name: string, value: string | undefined): string {
  if (value === undefined) {
    throw new ConfigError(
      name,
      'is required (for example redis://127.0.0.1:6380/0), or REDIS_CLUSTER_NODES for a Redis Cluster; `npm start` starts a private Redis and sets it for you',
    );
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(name, `is not a URL: "${value}"`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw new ConfigError(name, `must start with redis:// or rediss://, got "${url.protocol}//"`);
  }
  return value;
}
