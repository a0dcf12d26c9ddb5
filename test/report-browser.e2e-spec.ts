import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { runBench } from './helpers/bench';
import { describeWithBrowser, type Page, saveScreenshot } from './helpers/browser';

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
}

/** One dataset of a chart, as Chart.js holds it in the page. */
interface Plotted {
  label: string;
  last: unknown;
  values: unknown[];
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
      });
    }

    // What each chart plots, read back from Chart.js in the page.
    const plotted: Record<'sold' | 'latency' | 'codes', Plotted[]> = await page.evaluate(() => {
      const Chart = (globalThis as any).Chart;
      const datasets = (id: string) =>
        Chart.getChart(id).data.datasets.map((d: any) => ({
          label: d.label as string,
          last: d.data.length ? d.data[d.data.length - 1] : null,
          values: d.data as unknown[],
        }));
      return { sold: datasets('chart-sold'), latency: datasets('chart-latency'), codes: datasets('chart-codes') };
    });
    for (const row of rows) {
      // Units sold over time ends at what Redis holds: above the stock for the control.
      const line = plotted.sold.find((d) => d.label === row.label)!;
      expect({ row: row.label, units: (line.last as { y: number }).y }).toEqual({ row: row.label, units: row.sold });
      // The whole percentile curve, not four numbers.
      const curve = plotted.latency.find((d) => d.label === row.label)!;
      expect(curve.values.length).toBe(row.latencyByPercentile.length);
      expect(curve.values.length).toBeGreaterThan(10);
    }
    const stockLine = plotted.sold.find((d) => d.label.startsWith('stock'))!;
    expect((stockLine.last as { y: number }).y).toBe(50);
    expect(rows[1].sold).toBeGreaterThan((stockLine.last as { y: number }).y);
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
