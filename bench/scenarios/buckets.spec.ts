import { homeBucket } from '../../src/sale/buckets';
import { buyerSequence } from '../load';
import { skewedBuyers } from './buckets';

describe('--skew buyers (skewedBuyers)', () => {
  it('homes the given share of the buyers on bucket 0 and names the rest as every load does', () => {
    const ids = skewedBuyers(1_000, 3, 0.9, 0);
    expect(new Set(ids).size).toBe(1_000);
    const chosen = ids.filter((id) => id.startsWith('s'));
    expect(chosen).toHaveLength(900);
    expect(chosen.every((id) => homeBucket(id, 3) === 0)).toBe(true);
    const rest = ids.filter((id) => !id.startsWith('s')).sort();
    expect(rest).toEqual(Array.from({ length: 100 }, (_, i) => `b${i}`).sort());
  });

  it('adds --duplicates as buyerSequence() does: second requests of buyers already in the sequence', () => {
    const ids = skewedBuyers(50, 4, 0.5, 0.2);
    expect(ids).toHaveLength(60);
    expect(new Set(ids).size).toBe(50);
    expect(ids.filter((id) => id.startsWith('s')).length).toBeGreaterThanOrEqual(25);
  });

  it('with --skew 0, spreads as without it', () => {
    expect(skewedBuyers(10, 3, 0, 0).sort()).toEqual(buyerSequence(10, 0, Math.random).sort());
  });
});
