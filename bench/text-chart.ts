import type { SoldPoint } from './timeline';

/** What the chart draws of a row: its name, its units over time, its stock. */
export interface ChartRow {
  readonly label: string;
  readonly stock: number;
  readonly soldOverTime: readonly SoldPoint[];
}

/** One mark per row, told apart without colour (a log file has none); they repeat past the tenth row. */
const MARKS = ['●', '○', '◆', '◇', '▲', '△', '■', '□', '★', '☆'];
const STOCK = '─';

const n = (x: number) => x.toLocaleString('en-US');

/** Units sold at `ms`: the last point at or before it (the curve only rises). */
function unitsAt(points: readonly SoldPoint[], ms: number): number {
  let units = 0;
  for (const p of points) {
    if (p.ms > ms) break;
    units = p.units;
  }
  return units;
}

/**
 * Units held over time for each row (orders less returns), with the stock as a line: a terminal's picture of
 * the sale, printed last so it is what the learner sees. A row that sold more than its
 * stock is always drawn above the stock line, even by one unit, where rounding alone
 * would put it on it: that gap is the oversell the chart is for.
 */
export function textChart(rows: readonly ChartRow[], width = 60, height = 12): string {
  const stock = Math.max(0, ...rows.map((r) => r.stock));
  const top = Math.max(1, stock, ...rows.flatMap((r) => r.soldOverTime.map((p) => p.units)));
  const end = Math.max(1, ...rows.flatMap((r) => r.soldOverTime.map((p) => p.ms)));
  const over = top > stock;
  // Room above the stock line whenever something went past it, and below it for 0: a
  // small stock under a big oversell would otherwise round onto the 0 row.
  const stockLine = Math.max(
    stock > 0 ? 1 : 0,
    Math.min(Math.round((stock / top) * (height - 1)), over ? height - 2 : height - 1),
  );
  const line = (units: number) => {
    const y = Math.round((units / top) * (height - 1));
    if (units > stock) return Math.max(y, stockLine + 1);
    return units < stock ? Math.min(y, stockLine) : stockLine;
  };
  const grid = Array.from({ length: height }, () => Array<string>(width).fill(' '));
  if (stock > 0) grid[stockLine].fill(STOCK);
  rows.forEach((row, i) => {
    const mark = MARKS[i % MARKS.length];
    let previous: number | null = null;
    for (let x = 0; x < width; x++) {
      const y = line(unitsAt(row.soldOverTime, (x / (width - 1)) * end));
      // A steep climb between two columns is drawn as a wall, so the line stays joined.
      const from = previous === null ? y : Math.min(previous + 1, y);
      for (let k = from; k <= y; k++) grid[k][x] = mark;
      previous = y;
    }
  });
  const labels = new Map<number, string>([
    [height - 1, n(top)],
    [0, '0'],
  ]);
  if (stock > 0) labels.set(stockLine, `${n(stock)} stock`);
  const labelWidth = Math.max(...[...labels.values()].map((l) => l.length));
  const lines = ['units held over time'];
  for (let y = height - 1; y >= 0; y--) {
    lines.push(`${(labels.get(y) ?? '').padStart(labelWidth)} ┤${grid[y].join('')}`.trimEnd());
  }
  const axis = `${' '.repeat(labelWidth)} └${'─'.repeat(width)}`;
  const ms = `${n(Math.round(end))} ms`;
  lines.push(axis, `${' '.repeat(labelWidth + 2)}0${ms.padStart(width - 1)}`);
  const legend = rows.map((r, i) => `${MARKS[i % MARKS.length]} ${r.label}`);
  if (stock > 0) legend.push(`${STOCK} stock (${n(stock)})`);
  lines.push(`${' '.repeat(labelWidth + 2)}${legend.join('   ')}   (time: Redis's clock, from the first request)`);
  return lines.join('\n');
}
