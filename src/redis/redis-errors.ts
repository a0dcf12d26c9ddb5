import { ReplyError } from 'ioredis';

/**
 * Redis replies that mean "not now" or "not here" rather than "your command is wrong":
 * the server is loading its AOF after a restart, busy in a script, a replica/cluster is
 * failing over, or the slot is moving (MOVED, ASK, TRYAGAIN: ioredis follows them for
 * a command sent alone, but hands them to the caller from an auto-pipelined batch whose
 * replies differ). The buyer should retry; nothing was applied.
 */
const TRANSIENT_REPLIES = /^(LOADING|BUSY|MASTERDOWN|READONLY|TRYAGAIN|CLUSTERDOWN|MOVED|ASK)\b/;

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
  if (err instanceof ReplyError) return TRANSIENT_REPLIES.test(err.message);
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
  return isRedisUnavailable(err) && !(err instanceof ReplyError) && !NOT_SENT.test((err as Error).message);
}
