import type { OrderEntry } from './verdict';

/** `units` had been sold `ms` after the load started. */
export interface SoldPoint {
  readonly ms: number;
  readonly units: number;
}

/** Enough for a chart's width, few enough for the JSON. */
const MAX_POINTS = 300;

/**
 * Units held over time, cumulative, from the order stream (a unit given back, by a
 * cancel or an expiry, is an entry of negative quantity: the line then shows the units
 * held): each entry's id carries
 * Redis's clock, so this is when the sale really happened, not when the buyers heard.
 * x is ms since the load started (the bench's clock; same machine, same clock).
 *
 * A sale of 1,000 units has at most 1,000 distinct instants; a bigger one is thinned
 * to the last point of each of MAX_POINTS slices of time (the curve only rises, so
 * that is its top in the slice), always keeping the sell-out point (where the units
 * first reached `stock`: past it, a line above the stock is an oversell) and the last.
 */
export function soldOverTime(
  orders: readonly Pick<OrderEntry, 'ms' | 'quantity'>[],
  startedAt: number,
  stock: number,
  maxPoints = MAX_POINTS,
): SoldPoint[] {
  const steps: SoldPoint[] = [{ ms: 0, units: 0 }];
  let sellOut = -1;
  let units = 0;
  for (const o of [...orders].sort((a, b) => a.ms - b.ms)) {
    units += o.quantity;
    const ms = Math.max(0, o.ms - startedAt);
    const crossed = sellOut < 0 && stock > 0 && units >= stock;
    // One point per instant, except the start and the sell-out, which keep their own (more may sell in its millisecond).
    const previous = steps.length - 1;
    if (steps[previous].ms === ms && previous !== 0 && previous !== sellOut && !crossed) steps.pop();
    steps.push({ ms, units });
    if (crossed) sellOut = steps.length - 1;
  }
  if (steps.length <= maxPoints) return steps;
  const last = steps.length - 1;
  const span = steps[last].ms || 1;
  const kept: SoldPoint[] = [];
  steps.forEach((point, i) => {
    const slice = Math.floor((point.ms / span) * (maxPoints - 3));
    const next = steps[i + 1];
    const lastOfSlice = !next || Math.floor((next.ms / span) * (maxPoints - 3)) !== slice;
    if (i === 0 || i === sellOut || i === last || lastOfSlice) kept.push(point);
  });
  return kept;
}
