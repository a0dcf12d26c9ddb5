import { latencyCurve } from './latency-curve';

describe('latencyCurve', () => {
  // 1..1000 ms, shuffled: the value at p is p% of 1000, exactly.
  const latencies = Array.from({ length: 1000 }, (_, i) => i + 1).sort(() => Math.random() - 0.5);

  it('gives exact nearest-rank values at the usual percentiles, and the max at 100%', () => {
    const curve = latencyCurve(latencies);
    const at = (p: number) => curve.find((c) => c.percentile === p)?.ms;
    expect([at(0), at(90), at(99), at(99.9), at(100)]).toEqual([1, 900, 990, 999, 1000]);
  });

  it('spaces points evenly towards the tail, ten per tenfold step, down to one answer in n', () => {
    const curve = latencyCurve(latencies);
    // 0% .. 99.9% in 30 steps of 1/10 decade, then the max.
    expect(curve).toHaveLength(32);
    expect(curve.filter((c) => c.percentile >= 99 && c.percentile < 99.9)).toHaveLength(10);
    for (let i = 1; i < curve.length; i++) {
      expect(curve[i].percentile).toBeGreaterThan(curve[i - 1].percentile);
      expect(curve[i].ms).toBeGreaterThanOrEqual(curve[i - 1].ms);
    }
  });

  it('keeps fractions of a millisecond, and is empty without answers', () => {
    const curve = latencyCurve([1.234, 0.256, 0.5]);
    expect([curve[0], curve[curve.length - 1]]).toEqual([
      { percentile: 0, ms: 0.26 },
      { percentile: 100, ms: 1.23 },
    ]);
    expect(latencyCurve([])).toEqual([]);
  });
});
