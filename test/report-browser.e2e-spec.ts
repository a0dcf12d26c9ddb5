import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { runBench } from './helpers/bench';
import { describeWithBrowser, type Page, saveScreenshot } from './helpers/browser';
import { drawnCorners, stepProblems, type XY } from './helpers/drawn-line';

/** A row of the bench's JSON report, as far as the page shows it. */
interface JsonRow {
  label: string;
  requests: number;
  stock: number;
  sold: number;
  stockLeft: number;
  oversold: number;
  codes: Record<string, number>;
  soldOverTime: { ms: number; units: number }[];
  latencyByPercentile: { percentile: number; ms: number }[];
  history: { peak: { units: number; ms: number }; stock: number; startMs: number };
}

/** One dataset of a chart, as Chart.js holds it in the page, with its line's resolved options (none for bars). */
interface Plotted {
  label: string;
  last: unknown;
  values: unknown[];
  stepped?: unknown;
  tension?: number;
}

/**
 * The units-sold chart's legend item for the stock line, as Chart.js made it, and the
 * gaps in the ink of its symbol's first 26 px (read back from the canvas): a dashed
 * line has some, a box none.
 */
async function stockLegend(page: Page): Promise<{ lineDash: unknown; pointStyle: unknown; gaps: number }> {
  return page.evaluate(() => {
    const chart = (globalThis as any).Chart.getChart('chart-sold');
    const items: any[] = chart.legend.legendItems;
    const i = items.findIndex((item) => String(item.text).startsWith('stock'));
    const box = chart.legend.legendHitBoxes[i];
    const ratio = chart.currentDevicePixelRatio;
    const [x0, y0] = [Math.round(box.left * ratio), Math.round(box.top * ratio)];
    const [w, h] = [Math.round(26 * ratio), Math.round(box.height * ratio)];
    const pixels = chart.ctx.getImageData(x0, y0, w, h).data;
    // A column is inked if any pixel of it in the item's height is more than a quarter opaque.
    const inked = Array.from({ length: w }, (_, x) =>
      Array.from({ length: h }, (_, y) => pixels[(y * w + x) * 4 + 3]).some((alpha) => alpha > 64),
    );
    const first = inked.indexOf(true);
    const last = inked.lastIndexOf(true);
    let gaps = 0;
    for (let x = first + 1; first >= 0 && x <= last; x++) if (!inked[x] && inked[x - 1]) gaps++;
    return { lineDash: items[i].lineDash, pointStyle: items[i].pointStyle, gaps };
  });
}

/** What a summary row's cells show, as numbers (toLocaleString('en-US') undone). */
async function summaryRow(page: Page, label: string): Promise<Record<string, number>> {
  return page.$eval(`#summary tbody tr[data-strategy="${label}"]`, (tr) => {
    const cell = (name: string) => Number(tr.querySelector(`.${name}`)?.textContent?.replace(/,/g, ''));
    return {
      requests: cell('requests'),
      stock: cell('stock'),
      sold: cell('sold'),
      stockLeft: cell('stock-left'),
      oversold: cell('oversold'),
      peak: cell('peak'),
    };
  });
}

/**
 * The HTML report of a real bench run (the textbook lock and the unlocked control),
 * opened from its file in headless Chromium with every network request refused: it
 * must draw its three charts from the data it carries, and show what the JSON says.
 */
describeWithBrowser('bench HTML report in Chromium', (browser) => {
  jest.setTimeout(180_000);
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'seckill-report-'));
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('opens offline, draws every row against the stock line, and shows the JSON figures', async () => {
    const out = join(dir, 'r.json');
    // Bigger than the stock by far at the opening burst, so the control oversells (the
    // bench runs it up to three times in fresh apps until it does, and fails if not).
    const args = [
      '--buyers',
      '3000',
      '--connections',
      '300',
      '--stock',
      '50',
      '--strategy',
      'lock,none',
      '--warmup',
      '500',
    ];
    const rows = (runBench(args, out, 150_000).report as { rows: JsonRow[] }).rows;
    expect(rows.map((r) => r.label)).toEqual(['lock', 'none']);
    // The control really oversold, so its line has something to cross.
    expect(rows[1].oversold).toBeGreaterThan(0);

    const page = await browser().newPage({ viewport: { width: 1200, height: 900 } });
    // One file, nothing else: not the network, not even a file beside it.
    const own = pathToFileURL(join(dir, 'r.html')).href;
    const requested: string[] = [];
    await page.route('**/*', (route) => {
      const url = route.request().url();
      if (url === own) return route.continue();
      requested.push(url);
      return route.abort();
    });
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(own);
    await page.waitForSelector('body[data-ready="true"]');

    for (const row of rows) {
      expect({ row: row.label, ...(await summaryRow(page, row.label)) }).toEqual({
        row: row.label,
        requests: row.requests,
        stock: row.stock,
        sold: row.sold,
        stockLeft: row.stockLeft,
        oversold: row.oversold,
        peak: row.history.peak.units,
      });
    }

    // What each chart plots, read back from Chart.js in the page.
    const plotted: Record<'sold' | 'latency' | 'codes', Plotted[]> = await page.evaluate(() => {
      const Chart = (globalThis as any).Chart;
      const datasets = (id: string) =>
        Chart.getChart(id).data.datasets.map((d: any, i: number) => {
          const line = Chart.getChart(id).getDatasetMeta(i).dataset?.options;
          return {
            label: d.label as string,
            last: d.data.length ? d.data[d.data.length - 1] : null,
            values: d.data as unknown[],
            ...(line && { stepped: line.stepped, tension: line.tension }),
          };
        });
      return { sold: datasets('chart-sold'), latency: datasets('chart-latency'), codes: datasets('chart-codes') };
    });
    for (const row of rows) {
      // Units held over time ends at what Redis holds: above the stock for the control.
      const line = plotted.sold.find((d) => d.label === row.label)!;
      expect({ row: row.label, units: (line.last as { y: number }).y }).toEqual({ row: row.label, units: row.sold });
      // As drawn, a step after each order: 0 until the first, each rise at an order's time, no unit before its time.
      const corners = drawnCorners(line.values as XY[], line.stepped, line.tension);
      expect({ row: row.label, problems: stepProblems(corners, row.soldOverTime) }).toEqual({
        row: row.label,
        problems: [],
      });
      const firstOrder = row.soldOverTime.find((p) => p.units > 0)!.ms;
      expect(corners.filter((c) => c.x < firstOrder && c.y > 0)).toEqual([]);
      // The whole percentile curve, not four numbers.
      const curve = plotted.latency.find((d) => d.label === row.label)!;
      expect(curve.values.length).toBe(row.latencyByPercentile.length);
      expect(curve.values.length).toBeGreaterThan(10);
    }
    // Settlement's lag, dotted beside the units: each row's samples, as the JSON has them.
    for (const row of rows as unknown as {
      label: string;
      settlement?: { lag: { ms: number; unsettled: number }[] };
    }[]) {
      expect(row.settlement?.lag.length).toBeGreaterThan(0);
      const lagLine = plotted.sold.find((d) => d.label === `${row.label}: not yet settled`)!;
      expect(lagLine.values).toEqual(row.settlement!.lag.map((p) => ({ x: p.ms, y: p.unsettled })));
    }
    const stockLine = plotted.sold.find((d) => d.label.startsWith('stock'))!;
    expect((stockLine.last as { y: number }).y).toBe(50);
    // Its legend item is a dashed line, not a box.
    const legend = await stockLegend(page);
    expect({ ...legend, dashed: legend.gaps >= 2 }).toEqual({
      lineDash: [6, 4],
      pointStyle: 'line',
      gaps: expect.any(Number),
      dashed: true,
    });
    expect(rows[1].sold).toBeGreaterThan((stockLine.last as { y: number }).y);
    // The history checker's peak of each row, marked where the JSON says; the control's oversell a bar above the stock.
    for (const { label, history: h } of rows) {
      const mark = plotted.sold.find(
        (d) => d.label === `${label}: peak ${h.peak.units.toLocaleString('en-US')} units held`,
      );
      expect({ label, values: mark?.values }).toEqual({
        label,
        values: [{ x: h.peak.ms - h.startMs, y: h.peak.units }],
      });
    }
    const bar = plotted.sold.find((d) => d.label.startsWith('none: oversold by'))!;
    expect(bar.values).toEqual([
      { x: rows[1].history.peak.ms - rows[1].history.startMs, y: 50 },
      { x: rows[1].history.peak.ms - rows[1].history.startMs, y: rows[1].history.peak.units },
    ]);
    // Answers by code: one bar per row for each code, the JSON's counts.
    for (const dataset of plotted.codes) {
      expect({ code: dataset.label, counts: dataset.values }).toEqual({
        code: dataset.label,
        counts: rows.map((r) => r.codes[dataset.label] ?? null),
      });
    }
    expect(plotted.codes.map((d) => d.label)).toEqual(expect.arrayContaining(['CREATED', 'SOLD_OUT']));

    expect(requested).toEqual([]);
    expect(errors).toEqual([]);
    await saveScreenshot(page, 'bench-report');
  });
});
