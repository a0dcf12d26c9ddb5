/**
 * Redlock's clock-drift allowance: 1% of the TTL plus 2 ms. A hold is trusted until
 * acquisition (or renewal) + TTL - drift, measured from before the command was sent.
 */
export function driftMs(ttlMs: number): number {
  return Math.floor(ttlMs * 0.01) + 2;
}
