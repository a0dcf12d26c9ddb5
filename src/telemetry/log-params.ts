import type { Params } from 'nestjs-pino';
import { destination, type Level } from 'pino';
import type { LogLevel, TelemetryConfig } from './telemetry.config';
import { logMixin } from './http-requests';

/** LOG_LEVEL keeps Nest's names; pino calls `log` info and `verbose` trace. */
export const PINO_LEVELS: Readonly<Record<LogLevel, Level>> = {
  error: 'error',
  warn: 'warn',
  log: 'info',
  debug: 'debug',
  verbose: 'trace',
};

/**
 * nestjs-pino's LoggerModule as the app uses it: every `new Logger(context)` line is one
 * JSON line on stdout at LOG_LEVEL, and nothing runs per request. nestjs-pino mounts
 * pino-http as middleware on `forRoutes` (every route when unset; `exclude` only
 * subtracts from that), which would build a child logger and an async context per
 * request even with its request line off. An empty `forRoutes` registers the
 * middleware on no route at all; `autoLogging: false` says the same to pino-http, in
 * case it ever runs.
 *
 * Written synchronously: pino's default stdout writes asynchronously, and main.ts calls
 * process.exit right after its last line, so a line could be lost at exit or land
 * after a later one (an in-flight write overtaken by the exit's flush: "exiting with
 * code 0" before "HTTP server closed"). A sync write is a write(2) per line, and the
 * app logs events, never requests: a handful of lines, so it costs nothing.
 */
export function logParams(config: Pick<TelemetryConfig, 'logLevel'>): Params {
  return {
    pinoHttp: [
      // A line written for a request carries its id (`reqId`, its X-Request-Id): pino
      // asks the mixin at each line, so a request costs nothing until it logs one.
      { level: PINO_LEVELS[config.logLevel], autoLogging: false, mixin: logMixin },
      destination({ dest: 1, sync: true }),
    ],
    forRoutes: [],
  };
}
