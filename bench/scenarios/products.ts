/**
 * --products N: one sale of N products at once (p1..pN), the buyers spread over them
 * round-robin; each product judged on its own, and the row on their totals. Each id is
 * its own hash tag {p:<id>}, so on a cluster each product's keys share a slot and the
 * products spread over slots.
 */
import type { BenchOptions } from '../options';
import type { ProductLoad } from '../load';
import { judge, judgeProducts, ProductVerdict, SaleSnapshot, Verdict } from '../verdict';

/**
 * The products one sale of a row sells: `one` alone (today's single product), or with
 * --products N, N of them named by `many(1..N)`.
 */
export function productIds(options: BenchOptions, one: string, many: (i: number) => string): string[] {
  if (options.products === 1) return [one];
  return Array.from({ length: options.products }, (_, i) => many(i + 1));
}

/** The products the measured sale's `attempt` sells: `hot` (or p1..pN), `hot-2` (p1-2..) for the control's second, ... */
export function measuredProducts(options: BenchOptions, attempt: number): string[] {
  return productIds(options, attempt === 1 ? 'hot' : `hot-${attempt}`, (i) =>
    attempt === 1 ? `p${i}` : `p${i}-${attempt}`,
  );
}

/** The sale's verdict: one product's, or with several, their totals and each one's own. */
export function judgeSale(
  parts: readonly { readonly id: string; readonly sale: SaleSnapshot; readonly load?: ProductLoad }[],
  load: ProductLoad,
  quantity: number,
): { verdict: Verdict; products?: ProductVerdict[] } {
  if (parts.length === 1) return { verdict: judge(parts[0].sale, load, quantity) };
  const { total, products } = judgeProducts(
    parts.map((p) => ({ ...p, load: p.load! })),
    load,
    quantity,
  );
  return { verdict: total, products };
}
