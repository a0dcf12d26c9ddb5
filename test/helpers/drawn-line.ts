import { _steppedLineTo } from 'chart.js/helpers';

export interface XY {
  readonly x: number;
  readonly y: number;
}

/** A point of a row's `soldOverTime`: `units` sold by `ms`. */
export interface Sold {
  readonly ms: number;
  readonly units: number;
}

/**
 * The corners of the line Chart.js draws through `points`: the points themselves, and
 * with a `stepped` mode the corner it adds between two (its own _steppedLineTo, given a
 * context that records them). A curve (`tension` > 0) has no corners to check: refused.
 */
export function drawnCorners(points: readonly XY[], stepped: unknown, tension = 0): XY[] {
  if (tension !== 0) throw new Error(`a curve (tension ${tension}) is not a line of steps`);
  if (!stepped) return [...points];
  const corners: XY[] = [points[0]];
  const ctx = { lineTo: (x: number, y: number) => corners.push({ x, y }) };
  for (let i = 1; i < points.length; i++) {
    _steppedLineTo(ctx as never, points[i - 1] as never, points[i] as never, false, stepped as never);
  }
  return corners;
}

/**
 * What is wrong with a drawn line of units sold, against the orders it draws (the
 * row's `soldOverTime`): a unit drawn before its order's time, a count drawn late, a
 * slope (units drawn between two orders), or a rise at a time no order has.
 */
export function stepProblems(corners: readonly XY[], sold: readonly Sold[]): string[] {
  const by = (ms: number) => Math.max(0, ...sold.filter((p) => p.ms <= ms).map((p) => p.units));
  const before = (ms: number) => Math.max(0, ...sold.filter((p) => p.ms < ms).map((p) => p.units));
  const orderTimes = new Set(sold.filter((p, i) => i > 0 && p.units > sold[i - 1].units).map((p) => p.ms));
  const problems: string[] = [];
  corners.forEach((c, i) => {
    if (c.y > by(c.x)) problems.push(`${c.y} units drawn at ${c.x} ms, ${by(c.x)} sold by then`);
    if (c.y < before(c.x)) problems.push(`${c.y} units drawn at ${c.x} ms, ${before(c.x)} sold before then`);
    const prev = corners[i - 1];
    if (!prev) return;
    if (prev.x !== c.x && prev.y !== c.y)
      problems.push(`a slope from ${prev.y} at ${prev.x} ms to ${c.y} at ${c.x} ms`);
    if (prev.x === c.x && c.y > prev.y && !orderTimes.has(c.x)) problems.push(`a rise at ${c.x} ms, no order then`);
  });
  return problems;
}
