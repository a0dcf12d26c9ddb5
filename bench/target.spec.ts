import type { Measured } from './measured-sale';
import { unknownProducts } from './target';
import { passes } from './verdict';

describe('bench --target: the row judged', () => {
  /** A measured sale whose every invariant held, answered with `codes`. */
  const measured = (codes: Record<string, number>) =>
    ({
      load: { codes },
      verdict: {
        invariants: {
          noOversell: true,
          noUndersell: true,
          conservation: true,
          perUserLimit: true,
          accounting: true,
          exactlyOnce: true,
        },
        problems: [],
      },
    }) as unknown as Measured;

  it("fails a row whose buyers were answered 404 UNKNOWN_PRODUCT for the run's own product (an instance of another deployment)", () => {
    const judged = unknownProducts(measured({ CREATED: 20, SOLD_OUT: 80, UNKNOWN_PRODUCT: 100 }));
    expect(passes(judged.verdict.invariants, false)).toBe(false);
    expect(judged.verdict.invariants.noUndersell).toBe(false);
    expect(judged.verdict.problems).toEqual([
      "100 buyers answered 404 UNKNOWN_PRODUCT for the run's own product: an instance that does not sell it",
    ]);
  });

  it('leaves a row without UNKNOWN_PRODUCT answers as its verdict says', () => {
    const plain = measured({ CREATED: 20, SOLD_OUT: 80 });
    expect(unknownProducts(plain)).toBe(plain);
  });
});
