import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisClient } from '../redis/create-client';
import { LockTimeoutError } from '../errors/errors';
import { releaseLock } from '../redis/lua-scripts';
import type { PurchasePath } from '../orders/purchases/purchase-path';

/** How long an admin change of a product waits for another's to end, and how long its mark lives. */
const CHANGE_WAIT_MS = 5_000;
const CHANGE_TTL_MS = 30_000;
const CHANGE_POLL_MS = 25;

/**
 * Runs an admin change of a product (a PUT, a DELETE, a close) while no other runs,
 * from any instance: its mark (`admin`, SET NX with a TTL, compare-and-delete after) is
 * waited for up to CHANGE_WAIT_MS, then 503 LOCK_TIMEOUT, nothing changed. A product of
 * several escrow buckets is changed one bucket after another, and two changes
 * interleaved would leave its buckets in two sales; under a lock-free strategy nothing
 * else orders them.
 */
export async function oneChangeAtATime<T>(redis: RedisClient, admin: string, change: () => Promise<T>): Promise<T> {
  const token = randomBytes(12).toString('base64url');
  const until = performance.now() + CHANGE_WAIT_MS;
  while ((await redis.set(admin, token, 'PX', CHANGE_TTL_MS, 'NX')) !== 'OK') {
    if (performance.now() >= until) throw new LockTimeoutError(CHANGE_WAIT_MS);
    await sleep(CHANGE_POLL_MS);
  }
  try {
    return await change();
  } finally {
    // The mark's own key as the channel: one slot, legal in a script on a cluster.
    await releaseLock.run(redis, [admin], token, admin).catch(() => undefined);
  }
}

/**
 * Runs `fn` under the exclusion of every bucket of a product (PurchasePath.exclusive),
 * taken in bucket order (every caller takes them in that order, and purchases and moves
 * take one at a time: no deadlock), so that no purchase of any bucket is between its read
 * and its write while a PUT or DELETE checks and changes them all.
 */
export function exclusiveAll<T>(purchases: PurchasePath, buckets: readonly string[], fn: () => Promise<T>): Promise<T> {
  return buckets.reduceRight<() => Promise<T>>((inner, bucket) => () => purchases.exclusive(bucket, inner), fn)();
}
