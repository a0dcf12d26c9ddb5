import { CONFIG_DEFAULTS, ConfigError, loadConfig, LOCK_STRATEGY_NAMES } from './app-config';

const REQUIRED = { REDIS_URL: 'redis://127.0.0.1:6380', ADMIN_TOKEN: 'a-long-enough-admin-token' };

describe('loadConfig', () => {
  it('applies the frozen defaults', () => {
    const config = loadConfig(REQUIRED);
    expect(config).toEqual({
      port: 3000,
      host: '0.0.0.0',
      redisUrl: REQUIRED.REDIS_URL,
      redlockUrls: [],
      lockStrategy: 'fenced',
      lockTtlMs: 10_000,
      lockWaitMs: 5_000,
      requestTimeoutMs: 10_000,
      shutdownTimeoutMs: 8_000,
      adminToken: REQUIRED.ADMIN_TOKEN,
      keyPrefix: 'seckill:',
      allowUnsafe: false,
      logLevel: 'log',
      faultStopAt: null,
    });
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(CONFIG_DEFAULTS)).toBe(true);
  });

  it('reads every variable', () => {
    const config = loadConfig({
      ...REQUIRED,
      PORT: '8080',
      HOST: '127.0.0.1',
      LOCK_STRATEGY: 'none',
      LOCK_TTL_MS: '2000',
      LOCK_WAIT_MS: '0',
      REQUEST_TIMEOUT_MS: '1000',
      SHUTDOWN_TIMEOUT_MS: '100',
      KEY_PREFIX: 'shop:',
      ALLOW_UNSAFE: '1',
      LOG_LEVEL: 'debug',
    });
    expect(config).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      lockStrategy: 'none',
      lockTtlMs: 2000,
      lockWaitMs: 0,
      requestTimeoutMs: 1000,
      shutdownTimeoutMs: 100,
      keyPrefix: 'shop:',
      allowUnsafe: true,
      logLevel: 'debug',
    });
  });

  it.each([
    [{ REDIS_URL: undefined }, 'REDIS_URL is required'],
    [{ REDIS_URL: 'localhost:6379' }, 'REDIS_URL must start with redis://'],
    [{ REDIS_URL: 'http://x' }, 'REDIS_URL must start with redis://'],
    [{ ADMIN_TOKEN: undefined }, 'ADMIN_TOKEN is required'],
    [{ ADMIN_TOKEN: 'short' }, 'ADMIN_TOKEN is required and must be at least 16 characters'],
    [{ PORT: 'abc' }, 'PORT must be an integer from 0 to 65535, got "abc"'],
    [{ PORT: '70000' }, 'PORT must be an integer'],
    [{ PORT: '-1' }, 'PORT must be an integer'],
    [{ LOCK_TTL_MS: '10.5' }, 'LOCK_TTL_MS must be an integer'],
    [{ LOCK_TTL_MS: '50' }, 'LOCK_TTL_MS must be an integer from 100'],
    [{ LOCK_WAIT_MS: '1e3' }, 'LOCK_WAIT_MS must be an integer'],
    [{ REQUEST_TIMEOUT_MS: '0' }, 'REQUEST_TIMEOUT_MS must be an integer from 1000 to 600000, got "0"'],
    [{ SHUTDOWN_TIMEOUT_MS: '0' }, 'SHUTDOWN_TIMEOUT_MS must be an integer from 100 to 600000, got "0"'],
    [{ SHUTDOWN_TIMEOUT_MS: '700000' }, 'SHUTDOWN_TIMEOUT_MS must be an integer from 100'],
    [{ LOCK_STRATEGY: 'redlock-please' }, `LOCK_STRATEGY must be one of ${LOCK_STRATEGY_NAMES.join(', ')}`],
    [
      { LOCK_STRATEGY: 'none' },
      'LOCK_STRATEGY "none" can oversell and runs only as a demonstration: set ALLOW_UNSAFE=1',
    ],
    [{ LOCK_STRATEGY: 'none', ALLOW_UNSAFE: 'yes' }, 'ALLOW_UNSAFE must be 1, 0, true or false'],
    [{ KEY_PREFIX: '' }, 'KEY_PREFIX must be 1-64 characters'],
    [{ KEY_PREFIX: 'a{b}' }, 'KEY_PREFIX must be 1-64 characters'],
    [{ LOG_LEVEL: 'info' }, 'LOG_LEVEL must be one of error, warn, log, debug, verbose'],
    [{ HOST: 'a b' }, 'HOST must be an address'],
    [{ LOCK_STRATEGY: 'redlock' }, 'REDLOCK_URLS is required with LOCK_STRATEGY=redlock'],
    [{ LOCK_STRATEGY: 'redlock', REDLOCK_URLS: 'redis://a:1,http://b' }, 'REDLOCK_URLS must start with redis://'],
    [{ LOCK_STRATEGY: 'redlock', REDLOCK_URLS: 'redis://a:1,,redis://b:1' }, 'REDLOCK_URLS has an empty entry'],
    [{ LOCK_STRATEGY: 'redlock', REDLOCK_URLS: 'redis://a:1,redis://a:1' }, 'REDLOCK_URLS lists the same node twice'],
    [
      { FAULT_STOP_AT: 'before-write:2' },
      'FAULT_STOP_AT makes the app stop itself and is for the fault suite only: set ALLOW_UNSAFE=1',
    ],
    [
      { FAULT_STOP_AT: 'after-lunch:2', ALLOW_UNSAFE: '1' },
      'FAULT_STOP_AT must be <point>:<n> with a point of before-write',
    ],
    [
      { FAULT_STOP_AT: 'before-write:1', ALLOW_UNSAFE: '1', NODE_ENV: 'production' },
      'FAULT_STOP_AT makes the app stop itself and is never accepted with NODE_ENV=production',
    ],
    [
      { FAULT_STOP_AT: 'before-write:1', NODE_ENV: 'Production' },
      'FAULT_STOP_AT makes the app stop itself and is never accepted with NODE_ENV=production',
    ],
    [{ FAULT_STOP_AT: 'before-write:0', ALLOW_UNSAFE: '1' }, 'FAULT_STOP_AT must be <point>:<n>'],
    [{ FAULT_STOP_AT: 'before-write', ALLOW_UNSAFE: '1' }, 'FAULT_STOP_AT must be <point>:<n>'],
  ])('refuses %j with one line naming the variable', (overrides, message) => {
    const env = { ...REQUIRED, ...overrides };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    try {
      loadConfig(env);
    } catch (err) {
      expect((err as ConfigError).message).toContain(message);
      expect((err as ConfigError).message).not.toContain('\n');
      expect((err as ConfigError).variable).toBe(message.split(' ')[0]);
    }
  });

  it('reads REDLOCK_URLS as a list', () => {
    const config = loadConfig({
      ...REQUIRED,
      LOCK_STRATEGY: 'redlock',
      REDLOCK_URLS: 'redis://a:1, redis://b:2,redis://c:3',
    });
    expect(config.redlockUrls).toEqual(['redis://a:1', 'redis://b:2', 'redis://c:3']);
  });

  it("reads FAULT_STOP_AT, the fault suite's self-stop hook, only with ALLOW_UNSAFE=1", () => {
    expect(loadConfig({ ...REQUIRED, FAULT_STOP_AT: 'before-write:3', ALLOW_UNSAFE: '1' }).faultStopAt).toEqual({
      point: 'before-write',
      nth: 3,
    });
  });

  it('treats blank values as unset', () => {
    expect(loadConfig({ ...REQUIRED, PORT: '  ', LOCK_STRATEGY: '' })).toMatchObject({
      port: 3000,
      lockStrategy: 'fenced',
    });
  });
});
