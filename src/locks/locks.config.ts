import { checkRedisUrl } from '../redis/redis-url';
import { ConfigError, ConfigOf, int, section, setting } from '../settings/setting';

export const LOCKS_CONFIG = section('locks', {
  // The TTL bounds the damage of a crashed holder; below 100 ms a slow Redis
  // round trip alone could outlive the lock.
  lockTtlMs: int('LOCK_TTL_MS', 10_000, [100, 3_600_000], 'lock TTL: the longest a crashed holder can block a product'),
  lockWaitMs: int(
    'LOCK_WAIT_MS',
    5_000,
    [0, 600_000],
    'how long a buyer waits for the lock before 503 `LOCK_TIMEOUT`, counted from its own arrival even when it is served in a batch; `0` tries once',
  ),
  redlockUrls: setting(
    'REDLOCK_URLS',
    'started by `npm start`',
    'comma-separated URLs of independent Redis nodes for `redlock` (3 or 5); required with it when running `dist/src/main.js` yourself. `npm start` runs 3 with AOF and `appendfsync always` in `.data/redlock-1..3/`, so a restarted node keeps the locks it granted; run your own the same way, or restart one only after `LOCK_TTL_MS` ([strategies.md](strategies.md#redlock--redlock-over-independent-nodes))',
    (value): readonly string[] => {
      if (value === undefined) return [];
      const urls = value.split(',').map((u) => u.trim());
      if (urls.includes('')) throw new ConfigError('REDLOCK_URLS', `has an empty entry: "${value}"`);
      for (const url of urls) checkRedisUrl('REDLOCK_URLS', url);
      if (new Set(urls).size !== urls.length) throw new ConfigError('REDLOCK_URLS', 'lists the same node twice');
      return urls;
    },
  ),
});
export type LocksConfig = ConfigOf<typeof LOCKS_CONFIG>;
