import { parseRedisVersion, redisVersionProblem } from './redis-version';

const info = (version: string) => `# Server\r\nredis_version:${version}\r\nredis_git_sha1:00000000\r\n`;

describe('redisVersionProblem', () => {
  it.each(['7.0.0', '7.0.15', '7.4.2', '8.0.1', '10.0.0'])('accepts Redis %s', (version) => {
    expect(redisVersionProblem(info(version))).toBeNull();
  });

  it.each(['6.2.14', '6.0.0', '5.0.7', '2.8.24'])('refuses Redis %s, naming the version and the minimum', (version) => {
    expect(redisVersionProblem(info(version))).toBe(
      `Redis ${version} is too old: seckill needs Redis 7.0 or newer (SPUBLISH/SSUBSCRIBE for the lock release message)`,
    );
  });

  it('refuses an INFO without redis_version', () => {
    expect(redisVersionProblem('# Server\r\nredis_git_sha1:0\r\n')).toMatch(/^Redis did not say its version/);
  });

  it('reads the version field only, not a field that ends like it', () => {
    expect(parseRedisVersion('valkey_redis_version:6.0.0\r\nredis_version:7.2.4\r\n')).toEqual([7, 2, 4]);
    expect(parseRedisVersion('redis_version:7.2\r\n')).toEqual([7, 2, 0]);
  });
});
