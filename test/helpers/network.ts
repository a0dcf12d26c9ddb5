import type { LockStrategyName } from '../../src/config/app-config';
import { fencedWrite, keyedWrite, purchase } from '../../src/redis/lua-scripts';

/** An EXEC request on the wire (ioredis sends command names in lower case). */
const EXEC = '$4\r\nexec\r\n';

/**
 * The bytes that carry each strategy's write of an order, to arm a TCP proxy fault
 * (harness/tcp-proxy.ts) on exactly that request.
 */
export const WRITE_MARKER: Partial<Record<LockStrategyName, string>> = {
  // An unfenced hold writes with keyed-write-7.lua (the order and its reservation, whose
  // deadline is Redis's clock); optimistic sends the same script inside its MULTI.
  lock: keyedWrite.sha1,
  reentrant: keyedWrite.sha1,
  optimistic: EXEC,
  fenced: fencedWrite.sha1,
  atomic: purchase.sha1,
};

/**
 * The same for an order sent with an Idempotency-Key: keyed-write-7.lua checks its claim
 * as it writes. (Redlock's lock lives on nodes of its own; the orders, and so the
 * write, on REDIS_URL.)
 */
export const KEYED_WRITE_MARKER: Partial<Record<LockStrategyName, string>> = {
  ...WRITE_MARKER,
  lock: keyedWrite.sha1,
  reentrant: keyedWrite.sha1,
  redlock: keyedWrite.sha1,
};

/** The port of a redis:// URL, for a proxy in front of it. */
export function portOf(url: string): number {
  return Number(new URL(url).port);
}
