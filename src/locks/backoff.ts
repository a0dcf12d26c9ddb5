/** First retry waits up to this; each failed try doubles it up to the cap. */
const BASE_MS = 2;
const CAP_MS = 32;

/**
 * Full-jitter exponential backoff: a random wait up to min(cap, 2 ms x 2^attempt),
 * never past the time left. Random so that waiters spread out instead of retrying
 * in lockstep; short so that a freed lock is taken again quickly.
 */
export function backoffMs(attempt: number, leftMs: number, capMs = CAP_MS): number {
  return Math.min(leftMs, Math.random() * Math.min(capMs, BASE_MS * 2 ** attempt));
}
