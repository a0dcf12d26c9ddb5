import { HttpException } from '@nestjs/common';
import { ReplyError } from 'ioredis';
import {
  AppError,
  BadRequestError,
  FRAMEWORK_ERRORS,
  InternalError,
  RedisNoPermissionError,
  RedisNoReplicasError,
  RedisOutOfMemoryError,
  RedisPersistenceError,
  RedisReadOnlyError,
  RedisUnavailableError,
} from '../errors/errors';
import { notRun } from './unrun-retry';

/**
 * Redis replies that mean "not now" or "not here" rather than "your command is wrong":
 * the server is loading its AOF after a restart, busy in a script, a replica/cluster is
 * failing over, or the slot is moving (MOVED, ASK, TRYAGAIN: ioredis follows them for
 * a command sent alone, but hands them to the caller from an auto-pipelined batch whose
 * replies differ). The buyer should retry; nothing was applied.
 */
const TRANSIENT_REPLIES = /^(LOADING|BUSY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|MOVED|ASK)\b/;

/**
 * Replies by which Redis refuses a command it did not run, for a reason of its own
 * that outlasts a quick retry: each its own 503 code, so an operator reading the
 * answers (or the metrics) knows which knob to turn. Redis checks these before a
 * command runs, and a script's first write before the script writes anything, so
 * nothing was changed. In a MULTI the refused command aborts the whole EXEC
 * (EXECABORT, the refusal in `previousErrors`).
 */
const REFUSALS: readonly [RegExp, () => AppError][] = [
  [/^OOM\b/, () => new RedisOutOfMemoryError()],
  [/^MISCONF\b/, () => new RedisPersistenceError()],
  [/^NOREPLICAS\b/, () => new RedisNoReplicasError()],
  [/^READONLY\b/, () => new RedisReadOnlyError()],
  [/^NOPERM\b/, () => new RedisNoPermissionError(false)],
  // The same refusal met by a command inside a script (Redis 7): unlike the others it
  // can come after the script's first write, which stays (scripts do not roll back).
  // The start-up check tries every such command; this is a permission taken away since.
  [/^ERR The user executing the script can't/, () => new RedisNoPermissionError(true)],
];

/** The refusal `err` is (a fresh AppError of its code), or null if it is no refusal. */
export function redisRefusal(err: unknown): AppError | null {
  if (!(err instanceof ReplyError)) return null;
  const previous = (err as { previousErrors?: unknown[] }).previousErrors ?? [];
  for (const message of [
    (err as Error).message,
    ...previous.map((e) => (e instanceof Error ? e.message : String(e))),
  ]) {
    const refusal = REFUSALS.find(([reply]) => reply.test(message));
    if (refusal) return refusal[1]();
  }
  return null;
}

/**
 * Errors ioredis raises itself (never a server reply) when it cannot deliver a
 * command: the socket is closed or not writable, the per-command timeout fired, or
 * the reconnect budget for the request ran out.
 */
const CONNECTION_ERRORS =
  /Connection is closed|Stream isn't writeable|Command timed out|Reached the max retries|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|Cluster isn't ready|Too many Cluster redirections|Cluster is ended|Failed to refresh slots cache|None of startup nodes is available/;

/** True when `err` means Redis could not be reached, so the answer is 503, not 500. */
export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err instanceof ReplyError) {
    // notRun: also a MULTI aborted (EXECABORT) because a queued command was redirected.
    return TRANSIENT_REPLIES.test(err.message) || notRun(err) !== null || redisRefusal(err) !== null;
  }
  return err.name === 'MaxRetriesPerRequestError' || CONNECTION_ERRORS.test(err.message);
}

/**
 * Errors that say the command was never sent: the client was not connected (or, on a
 * cluster, not ready), so the server cannot have run it; or every node it went to
 * redirected or refused it without running it.
 */
const NOT_SENT =
  /Stream isn't writeable|ECONNREFUSED|EHOSTUNREACH|Cluster isn't ready|Too many Cluster redirections\. Last error: (?:ReplyError: )?(?:MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b/;

/**
 * True when a write may or may not have run: it was sent, and its reply never came
 * (the command timed out, or the connection closed under it). The client never sends
 * a command twice (`autoResendUnfulfilledCommands: false`), so the outcome is one
 * write or none, and only reading Redis can tell which.
 */
export function isOutcomeUnknown(err: unknown): boolean {
  return (
    isRedisUnavailable(err) && !(err instanceof ReplyError) && !NOT_SENT.test((err as Error).message) && !notRun(err)
  );
}

/**
 * The answer an error gets, as ErrorFilter writes it: an AppError as it is, a
 * framework 4xx by its status, Redis out of reach as REDIS_UNAVAILABLE, anything
 * else INTERNAL_ERROR. Pure: the purchase route reads the code it will answer with
 * (for telemetry) before it rethrows, and the filter logs the unexpected ones.
 */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof HttpException && err.getStatus() < 500) {
    const Known = FRAMEWORK_ERRORS[err.getStatus()] ?? BadRequestError;
    return new Known(err.message);
  }
  const refused = redisRefusal(err);
  if (refused) return refused;
  if (isRedisUnavailable(err)) return new RedisUnavailableError();
  return new InternalError();
}
