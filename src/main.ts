import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { type RedisClient, whenReady } from './redis/create-client';
import { ConfigError, loadServerConfig } from './config/app-config';
import { readEnvFile } from './config/env-file';
import { createApp } from './create-app';
import { OpenRequests } from './open-requests';
import { REDIS_CLIENT } from './redis/redis.constants';
import { checkRedisVersion } from './redis/redis-version';
import { checkEvictionPolicy } from './redis/redis-fitness';
import { permissionProblem } from './redis/redis-permissions';
import { loginProblems } from './redis/redis-login';
import { KeyLayout } from './redis/key-layout';
import { listeningOn } from './listen-address';
import type { AddressInfo } from 'node:net';

/**
 * Accept queue length. A flash sale opens with thousands of connections at once;
 * Node's default of 511 drops the overflow's SYNs, and each dropped buyer waits out
 * TCP's 1 s, 3 s, 7 s... retransmits. The kernel caps it at net.core.somaxconn.
 */
const LISTEN_BACKLOG = 4096;

/**
 * How long to wait for the Redis connection before accepting buyers anyway. A buyer
 * served while the client is still connecting gets 503 REDIS_UNAVAILABLE: correct,
 * but needless when the connection is milliseconds away (a second worker of a
 * cluster starting while the first already serves). Past this, Redis is really
 * down: listen, and let /health and the 503s say so.
 */
const REDIS_READY_WAIT_MS = 10_000;

/** The app's logger, once the app exists: from then on even a failure to start is a JSON line. */
let appLogger: Logger | undefined;

async function main(): Promise<void> {
  let config;
  try {
    readEnvFile();
    config = await loadServerConfig(process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // One clear line per invalid variable, and no stack trace: plain text, not a JSON log
    // line, since no logger exists yet and a person reads it.
    for (const line of err.lines) console.error(`seckill: invalid configuration: ${line}`);
    process.exit(1);
  }
  // A login Redis refuses is configuration too: it never heals, where an outage does.
  const refused = await loginProblems(config);
  if (refused.length > 0) {
    for (const line of refused) console.error(`seckill: refusing to start: ${line}`);
    process.exit(1);
  }
  const app = await createApp(config);
  // Nest holds the lines logged while the app is built (bufferLogs) until listen()
  // succeeds: a refusal to serve before it (a Redis too old, evicting, or a user
  // without a command) exited with its reason still in the buffer, and said nothing.
  app.flushLogs();
  const logger = new Logger('Main');
  appLogger = logger;

  const open = new OpenRequests(app.getHttpServer());
  // The steps of a shutdown, one line each: the signal, the HTTP server drained (here),
  // Redis and the lock's connections closed (their modules), the exit code (exit()).
  app.getHttpServer().once('close', () => logger.log('HTTP server closed: every connection answered and ended'));
  const exit = (code: number): never => {
    logger.log(`exiting with code ${code}`);
    process.exit(code);
  };

  // Our own signal handling instead of enableShutdownHooks(): Nest re-raises the
  // signal after closing, which ends the process with 143, not 0. app.close()
  // stops accepting, lets in-flight purchases finish (each releases its lock),
  // then closes Redis. SHUTDOWN_TIMEOUT_MS bounds it: what is still open then is
  // cut and the process exits, 0 if only slow clients were cut (each answered 408),
  // 1 if a request in progress or the closing itself was.
  let closing = false;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      if (closing) return;
      closing = true;
      logger.log(`${signal}: finishing in-flight requests, then closing (at most ${config.shutdownTimeoutMs} ms)`);
      setTimeout(() => exit(cutAtDeadline(open, config.shutdownTimeoutMs, logger)), config.shutdownTimeoutMs);
      app.close().then(
        () => exit(0),
        (err: Error) => {
          logger.error(`shutdown failed: ${err.message}`);
          exit(1);
        },
      );
    });
  }

  const redis = app.get<RedisClient>(REDIS_CLIENT);
  if (!(await whenReady(redis, REDIS_READY_WAIT_MS))) {
    logger.warn(
      `Redis is not reachable after ${REDIS_READY_WAIT_MS} ms; listening anyway (purchases get 503 until it is)`,
    );
  } else {
    // A user without a command the app needs, or a Redis too old for the lock's release
    // message, would fail purchases after their write while /health said ok, and a
    // Redis that may evict keys can lose a lock or a fencing counter and sell twice:
    // refuse to serve. A check that cannot be made (Redis gone again, a node that does
    // not answer) proves nothing either way: it is said, and /health asks again.
    const cannot = (what: string) => (err: Error) => {
      logger.warn(`could not check ${what} at start-up: ${err.message}`);
      return null;
    };
    const eviction = config.redisAllowEviction
      ? null
      : await checkEvictionPolicy(redis).then((found) => {
          if (found.unanswered.length > 0) {
            logger.warn(`could not read maxmemory-policy of ${found.unanswered.join(', ')}; /health reads it again`);
          }
          return found.problems[0] ?? null;
        }, cannot('the eviction policy'));
    const keys = app.get(KeyLayout);
    const problem =
      (await permissionProblem(redis, keys, {
        waitReplicas: config.redisWaitReplicas,
        settle: config.databaseUrl !== null,
        // A settler elsewhere (npm run settle): this instance's resets make the group too.
        // (Unread, it is said, and taken as not marked: the reset itself asks before it deletes.)
        makesGroups:
          (await redis.exists(keys.settling).catch((err: Error) => {
            logger.warn(`could not read whether a settler marked ${keys.settling}: ${err.message}`);
            return 0;
          })) === 1,
      }).catch(cannot("the Redis user's permissions"))) ??
      (await checkRedisVersion(redis).catch(cannot("Redis's version"))) ??
      eviction;
    if (problem) {
      // A log line like every other once the logger exists (a JSON reader sees it).
      logger.error(`refusing to serve: ${problem}`);
      await app.close().catch(() => undefined);
      exit(1);
    }
  }
  await app.listen({ port: config.port, host: config.host, backlog: LISTEN_BACKLOG });
  logger.log(`seckill listening on ${listeningOn(app.getHttpServer().address() as AddressInfo)}`);
}

/** Cuts what the shutdown deadline found open, says what, and returns the exit code. */
function cutAtDeadline(open: OpenRequests, timeoutMs: number, logger: Logger): number {
  const passed = `shutdown deadline (${timeoutMs} ms) passed`;
  const { unfinished, inProgress } = open.cut();
  if (unfinished > 0) {
    logger.warn(
      `${passed}: answered ${unfinished} unfinished request${unfinished === 1 ? '' : 's'} 408 REQUEST_TIMEOUT (sent too slowly)`,
    );
  }
  if (inProgress.length > 0) {
    const shown =
      inProgress.slice(0, 10).join(', ') + (inProgress.length > 10 ? `, and ${inProgress.length - 10} more` : '');
    logger.error(
      `${passed}: ${inProgress.length} request${inProgress.length === 1 ? '' : 's'} in progress answered 503 OUTCOME_UNKNOWN: ${shown} (its purchase may have been mid-write)`,
    );
    return 1;
  }
  if (unfinished === 0) {
    // No connection was open: the closing itself (Redis, the lock's connections) hung.
    logger.error(`${passed}: no request was open, but the app had not finished closing (Redis, the locks)`);
    return 1;
  }
  return 0;
}

main().catch((err: Error) => {
  // Before the app exists (Nest could not even build it) no logger does: plain text for
  // a person. After, the app's logger, so stdout stays JSON lines; the stack goes in the
  // line, as Nest's own error lines carry theirs.
  if (appLogger) {
    appLogger.error(`failed to start: ${err.message}`, err.stack);
    appLogger.log('exiting with code 1');
  } else {
    console.error(`seckill: failed to start: ${err.stack ?? err.message}`);
  }
  process.exit(1);
});
