import { ConfigError, ConfigOf, defaulted, flag, section } from '../settings/setting';

/** LOG_LEVEL, under Nest's names. */
export const LOG_LEVELS = ['error', 'warn', 'log', 'debug', 'verbose'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
/**
 * LOG_LEVEL under pino's names (the log is pino's), as the Nest level that writes the
 * same lines. The app logs nothing at fatal, and its errors are always written: fatal
 * and silent write what error does.
 */
const PINO_LEVEL_NAMES: ReadonlyMap<string, LogLevel> = new Map([
  ['trace', 'verbose'],
  ['debug', 'debug'],
  ['info', 'log'],
  ['warn', 'warn'],
  ['error', 'error'],
  ['fatal', 'error'],
  ['silent', 'error'],
]);

export const TELEMETRY_CONFIG = section('telemetry', {
  logLevel: defaulted<LogLevel>(
    'LOG_LEVEL',
    'log',
    "the least severe level logged, by Nest's names, `error`, `warn`, `log`, `debug`, `verbose`, or pino's, `error`, `warn`, `info` (`log`), `debug`, `trace` (`verbose`); pino's `fatal` and `silent` write what `error` does (the app logs nothing at fatal, and always writes its errors); JSON lines on stdout, none per request ([Logs](observability.md#logs))",
    (raw) => {
      const value = raw.toLowerCase();
      const level = (LOG_LEVELS as readonly string[]).includes(value)
        ? (value as LogLevel)
        : PINO_LEVEL_NAMES.get(value);
      if (level === undefined) {
        throw new ConfigError(
          'LOG_LEVEL',
          `must be one of ${LOG_LEVELS.join(', ')}, or pino's ${[...PINO_LEVEL_NAMES.keys()].join(', ')}; got "${value}"`,
        );
      }
      return level;
    },
  ),
  telemetry: flag(
    'TELEMETRY',
    true,
    "`0` turns off recording the [metrics](observability.md#metrics) (and the live dashboard's aggregate): no listener on the purchase route, the lock not timed; `/metrics` then serves only Node's process metrics and `seckill_info`. For measuring what they cost",
  ),
});
export type TelemetryConfig = ConfigOf<typeof TELEMETRY_CONFIG>;
