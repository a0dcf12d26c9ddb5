/** `percentile` per cent of the answers came within `ms`. */
export interface LatencyPoint {
  readonly percentile: number;
  readonly ms: number;
}

/** Points per tenfold step towards 100%: 90 → 99 → 99.9 each get this many. */
const PER_DECADE = 10;

/**
 * The whole latency distribution, as HdrHistogram's percentile plot draws it: points
 * evenly spaced in 1 / (1 - p), so the tail gets as many as the body (0%, ..., 90%, ...,
 * 99%, ..., 99.9%, ...) down to one answer in `n`, then the max at 100%.
 *
 * Exact (nearest rank over every latency, sorted once): autocannon's own histogram
 * keeps whole milliseconds and fifteen fixed percentiles, too coarse for a fast app's
 * body and too few for its tail, and sorting 100,000 numbers costs a few milliseconds.
 */
export function latencyCurve(latencies: ArrayLike<number>): LatencyPoint[] {
  const sorted = Float64Array.from(latencies).sort();
  const n = sorted.length;
  if (n === 0) return [];
  const at = (exact: number): LatencyPoint => {
    const percentile = Math.round(exact * 1e6) / 1e6;
    // Nearest rank; the epsilon keeps 99.9% of 1,000 at rank 999, not 1,000 by a float's last bit.
    const rank = Math.ceil((percentile / 100) * n - 1e-9);
    return { percentile, ms: Math.round(sorted[Math.min(n - 1, Math.max(0, rank - 1))] * 100) / 100 };
  };
  const points: LatencyPoint[] = [];
  // Stop where a step would name a rank finer than one answer.
  for (let k = 0; 10 ** (k / PER_DECADE) <= n; k++) points.push(at(100 * (1 - 10 ** (-k / PER_DECADE))));
  points.push({ percentile: 100, ms: Math.round(sorted[n - 1] * 100) / 100 });
  return points;
}
