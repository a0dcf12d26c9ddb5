import { Logger } from '@nestjs/common';
import { Redis } from 'ioredis';

/**
 * Upper bound on one command's round trip. A purchase must end in a definite answer,
 * so a command stuck on a dead socket fails (503 REDIS_UNAVAILABLE) instead of waiting
 * for a reconnect that may never come.
 */
export const COMMAND_TIMEOUT_MS = 2_000;

/**
 * An ioredis client as the app uses them all (the main one, Redlock's nodes): fail
 * fast while Redis is away, log each outage once.
 */
export function createRedisClient(url: string, name: string): Redis {
  const logger = new Logger(name);
  const client = new Redis(url, {
    // No offline queue and one retry per request: while Redis is away, buyers
    // get an immediate 503 instead of piling up behind a reconnect.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    // Never send a command twice. ioredis would resend every command that had no
    // reply when a connection dropped, writes included: a purchase whose EXEC was
    // applied but whose reply was lost would run again and sell twice. A write with
    // no reply is an unknown outcome (OUTCOME_UNKNOWN), for the caller to resolve.
    autoResendUnfulfilledCommands: false,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectionName: 'seckill',
    // On shutdown a socket that will not close cleanly is destroyed after this.
    disconnectTimeout: 500,
    // Commands issued in the same event-loop tick leave in one socket write: under a
    // burst, thousands of buyers' reads cost a handful of syscalls, not one each.
    enableAutoPipelining: true,
  });
  // ioredis emits one error per failed reconnect; say it once per outage.
  let outageReported = false;
  client.on('ready', () => {
    outageReported = false;
    logger.log(`connected to ${redactUrl(url)}`);
  });
  client.on('error', (err: Error) => {
    if (outageReported) return;
    outageReported = true;
    logger.warn(`unavailable: ${err.message}`);
  });
  return client;
}

/** QUIT a client that is connected (replies on the wire still arrive); just drop one that is not. */
export async function closeRedisClient(client: Redis): Promise<void> {
  if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
  else client.disconnect();
}

function redactUrl(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//***@');
}
