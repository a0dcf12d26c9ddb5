import { textChart } from './text-chart';

/** A sale that sold `units`, one per millisecond from 10 ms, against `stock`. */
const sale = (label: string, units: number, stock = 100) => ({
  label,
  stock,
  soldOverTime: [{ ms: 0, units: 0 }, ...Array.from({ length: units }, (_, i) => ({ ms: 10 + i, units: i + 1 }))],
});

/** The plot's lines, top first, without the labels left of the axis. */
function plot(chart: string): string[] {
  return chart
    .split('\n')
    .filter((l) => l.includes('┤'))
    .map((l) => l.slice(l.indexOf('┤') + 1));
}

describe('textChart', () => {
  it('draws the stock as a line across the chart, labelled, with both axes and a legend', () => {
    const chart = textChart([sale('lock', 100)], 40, 10);
    const lines = chart.split('\n');
    expect(plot(chart)).toHaveLength(10);
    expect(lines.find((l) => /^100 stock ┤/.test(l))).toMatch(/┤[─●]{40}$/);
    expect(lines.some((l) => /^\s+0 ┤/.test(l))).toBe(true);
    expect(chart).toContain(`└${'─'.repeat(40)}`);
    expect(chart).toMatch(/\n\s+0\s+109 ms\n/);
    expect(chart).toContain('● lock   ─ stock (100)');
  });

  it('keeps a small stock off the 0 row when an oversell dwarfs it', () => {
    const chart = textChart([sale('none', 100, 1)], 40, 10);
    const lines = chart.split('\n');
    // 0 keeps its own row at the bottom, the stock line sits above it.
    expect(lines.find((l) => /^\s+0 ┤/.test(l))).toBeDefined();
    expect(lines.find((l) => /^1 stock ┤/.test(l))).toBeDefined();
    expect(lines.findIndex((l) => /^1 stock ┤/.test(l))).toBeLessThan(lines.findIndex((l) => /^\s+0 ┤/.test(l)));
  });

  it('draws a row that sold past the stock above the stock line, even by one unit, and one that did not, never above it', () => {
    for (const oversold of [1, 40]) {
      const chart = textChart([sale('lock', 100), sale('none', 100 + oversold)], 40, 10);
      const rows = plot(chart);
      const stockRow = rows.findIndex((l) => l.includes('─'));
      expect(stockRow).toBeGreaterThan(0);
      const above = rows.slice(0, stockRow).join('');
      expect({ oversold, none: above.includes('○'), lock: above.includes('●') }).toEqual({
        oversold,
        none: true,
        lock: false,
      });
      expect(chart).toContain('● lock   ○ none   ─ stock (100)');
      // The top of the axis names the most units any row sold.
      expect(chart.split('\n')[1]).toMatch(new RegExp(`^\\s*${100 + oversold} ┤`));
    }
  });

  it('draws a lock that sold exactly the stock on the stock line, ending there', () => {
    const rows = plot(textChart([sale('lock', 100)], 40, 10));
    const stockRow = rows.findIndex((l) => l.includes('─'));
    expect(stockRow).toBe(0);
    expect(rows[stockRow].endsWith('●')).toBe(true);
    expect(rows[rows.length - 1].startsWith('●')).toBe(true);
  });
});
