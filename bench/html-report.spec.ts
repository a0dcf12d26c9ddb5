import { runInNewContext } from 'node:vm';
import { drawnCorners, stepProblems } from '../test/helpers/drawn-line';
import { failedReport, historyReport, historyVerdict } from '../test/helpers/history-report';
import { BenchResults, chartJsSource, htmlPathFor, htmlReport } from './html-report';
import { Row } from './report';

/** A row as the bench writes it, with the fields the page reads. */
function row(strategy: string, fields: Partial<Row> = {}): Row {
  return {
    strategy,
    label: strategy,
    unsafe: strategy === 'none',
    workers: 1,
    telemetry: true,
    buyers: 5000,
    requests: 5000,
    throughput: 4321,
    latency: { p50: 10, p90: 20, p99: 30, max: 40 },
    latencyByPercentile: [
      { percentile: 0, ms: 1.5 },
      { percentile: 90, ms: 20 },
      { percentile: 99, ms: 30 },
      { percentile: 100, ms: 40 },
    ],
    soldOverTime: [
      { ms: 0, units: 0 },
      { ms: 12, units: 1000 },
    ],
    status: { '201': 1000, '409': 4000 },
    codes: { CREATED: 1000, SOLD_OUT: 4000 },
    stock: 1000,
    sold: 1000,
    stockLeft: 0,
    oversold: 0,
    invariants: { noOversell: true },
    pass: true,
    ...fields,
  } as unknown as Row;
}

const results = (rows: Row[], command = 'npm run bench -- --strategy lock,none'): BenchResults => ({
  command,
  date: '2026-11-24T08:00:00.000Z',
  machine: { cpus: 2, cpuModel: 'AMD EPYC', node: 'v24.21.0', redis: '7.0.15' },
  rows,
});

const oversold = row('none', {
  sold: 1178,
  stockLeft: -178,
  oversold: 178,
  soldOverTime: [
    { ms: 0, units: 0 },
    { ms: 30, units: 1178 },
  ],
  status: { '201': 1178, '409': 3822 },
  codes: { CREATED: 1178, SOLD_OUT: 3822 },
  invariants: { noOversell: false } as Row['invariants'],
});

const START = 1_700_000_000_000;

/** The none row: 200 units held of 100 at its peak, 120 ms in, 11 over at the end; two false refusals, one late write. */
const peaked = row('none', {
  stock: 100,
  sold: 111,
  stockLeft: -11,
  oversold: 11,
  soldOverTime: [
    { ms: 0, units: 0 },
    { ms: 100, units: 150 },
    { ms: 300, units: 111 },
  ],
  history: historyVerdict(
    failedReport(100, { units: 200, ms: START + 120 }, 'oversell', [
      { ms: START + 110, orderIds: ['o101'], detail: 'first above the stock' },
    ]),
    START,
    {
      checks: { ...historyReport().checks, oversell: 'fail', falseRefusals: 'fail', outsideWrites: 'fail' },
      counts: { ...historyReport().counts, oversell: 100, falseRefusals: 7, outsideWrites: 1 },
      findings: [
        { check: 'oversell', ms: START + 110, orderIds: ['o101'], detail: 'first above the stock' },
        { check: 'falseRefusals', ms: START + 250, orderIds: [], userId: 'b9', detail: 'SOLD_OUT while 40 were free' },
        { check: 'falseRefusals', ms: START + 260, orderIds: [], userId: 'b8', detail: 'SOLD_OUT while 40 were free' },
        { check: 'outsideWrites', ms: START + 280, orderIds: ['o7'], userId: 'b7', detail: 'late write' },
      ],
    },
  ),
  invariants: { noOversell: false, history: false } as Row['invariants'],
});

const chartJs = chartJsSource();

/** The embedded results, as the page's script reads them. */
function embedded(html: string): unknown {
  const json = /<script type="application\/json" id="bench-data">([^]*?)<\/script>/.exec(html)![1];
  return JSON.parse(json);
}

describe('htmlReport', () => {
  it('is one file that fetches nothing: Chart.js inlined, no http(s) src or href, no stylesheet link', () => {
    const html = htmlReport(results([row('lock'), oversold]), chartJs);
    expect(chartJs.length).toBeGreaterThan(100_000);
    expect(html).toContain(chartJs);
    expect(html).toMatch(/^\s*\* Chart\.js v4\./m);
    expect(html).not.toMatch(/(src|href)\s*=\s*["']?\s*(https?:)?\/\//i);
    expect(html).not.toMatch(/<link\b|@import|\burl\(/i);
    expect(html).not.toMatch(/\bimport\s*\(/);
  });

  it('embeds the results as JSON that parses back to the same rows, command, date and machine', () => {
    const input = results([row('lock'), oversold]);
    expect(embedded(htmlReport(input, chartJs))).toEqual(JSON.parse(JSON.stringify(input)));
  });

  it('keeps a </script> in the data (a label, the command) inside its element, and shows it as text', () => {
    const evil = '</script><script>alert(1)</script><!--';
    const input = results([row('lock', { label: evil })], `npm run bench -- ${evil}`);
    const html = htmlReport(input, chartJs);
    // Only the page's own three script elements close.
    expect(html.match(/<\/script/gi)).toHaveLength(3);
    expect(html).not.toContain('<script>alert(1)');
    expect(embedded(html)).toEqual(JSON.parse(JSON.stringify(input)));
    expect(html).toContain('<code id="command">npm run bench -- &lt;/script&gt;&lt;script&gt;alert(1)');
    expect(html).toContain('data-strategy="&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;!--"');
  });

  it('has a summary row per bench row with its figures as en-US integers, and the command, date and machine', () => {
    const html = htmlReport(results([row('lock'), oversold]), chartJs);
    const tr = /<tr data-strategy="none"[^>]*>(.*?)<\/tr>/.exec(html)![1];
    const cell = (name: string) => new RegExp(`<td class="${name}">([^<]*)</td>`).exec(tr)?.[1];
    expect({
      requests: cell('requests'),
      sold: cell('sold'),
      left: cell('stock-left'),
      oversold: cell('oversold'),
      result: cell('result'),
    }).toEqual({
      requests: '5,000',
      sold: '1,178',
      left: '-178',
      oversold: '178',
      result: 'expected failure shown (noOversell)',
    });
    expect(html.match(/<tr data-strategy=/g)).toHaveLength(2);
    expect(html).toContain('<code id="command">npm run bench -- --strategy lock,none</code>');
    expect(html).toContain('<span id="date">2026-11-24T08:00:00.000Z</span>');
    expect(html).toContain('Node v24.21.0, Redis 7.0.15, 2 × AMD EPYC');
    for (const id of ['summary', 'chart-sold', 'chart-latency', 'chart-codes']) expect(html).toContain(`id="${id}"`);
  });

  it('states the telemetry off/on throughput ratio of an off row', () => {
    const off = row('fenced', { label: 'fenced telemetry-off', telemetry: false, vsTelemetryOn: { throughput: 1.04 } });
    const html = htmlReport(results([row('fenced'), off]), chartJs);
    expect(html).toContain('<li>fenced telemetry-off: 4,321 req/s, 1.04× the throughput of fenced (off/on, same run)');
  });

  it("names a bucketed row's buckets and moves, with its per-shard CPU split", () => {
    const shard = (node: string, share: number) => ({
      node,
      cpuUs: 1,
      cpuUsPerSale: 1,
      commands: 1,
      commandsPerSale: 1,
      share,
    });
    const bucketed = row('fenced', {
      label: 'fenced buckets-3',
      buckets: { count: 3, ids: ['hot', 'hot~1', 'hot~4'], moves: 28, cluster: true, skew: 0.9 },
      cost: { shards: [shard('127.0.0.1:7001', 0.75), shard('127.0.0.1:7002', 0.12), shard('127.0.0.1:7003', 0.13)] },
    } as unknown as Partial<Row>);
    const html = htmlReport(results([row('fenced'), bucketed]), chartJs);
    expect(html).toContain(
      '<ul id="buckets">\n<li data-strategy="fenced buckets-3">fenced buckets-3: 3 buckets (hot, hot~1, hot~4) on a Redis Cluster; ' +
        '28 moves of rights into them; --skew 0.9: 90% of the buyers chosen with bucket 0 (hot) as their home; ' +
        'per-shard CPU split: fenced buckets-3: shard 127.0.0.1:7001 75% · 127.0.0.1:7002 12% · 127.0.0.1:7003 13%</li>',
    );
    expect(htmlReport(results([row('fenced')]), chartJs)).not.toContain('id="buckets"');
  });

  it("states a catalog row's with/without throughput ratio, and each settling row's order lag", () => {
    const catalog = { products: 50, listed: 50, listMs: 106 };
    const orderLag = { orders: 30, p50: 13.3, p99: 109.3, max: 109.3, clock: 'one machine' as const };
    const withCatalog = row('fenced', {
      label: 'fenced catalog-50',
      catalog,
      vsNoCatalog: { throughput: 0.97 },
      settlement: { drainMs: 0, rows: 30, byStatus: { reserved: 30 }, lag: [], orderLag },
    });
    const html = htmlReport(results([row('fenced'), withCatalog]), chartJs);
    expect(html).toContain(
      '<li data-strategy="fenced catalog-50">fenced catalog-50: 4,321 req/s with 50 idle products listed (through the admin API in 106 ms; ' +
        '50 in Redis&#39;s products set), 0.97× the throughput of fenced (with/without, same run; goal ≥ 0.95×)</li>',
    );
    expect(html).toContain(
      '<ul id="settlement-lag">\n<li data-strategy="fenced catalog-50">fenced catalog-50: p50 13.3 ms, p99 109.3 ms, max 109.3 ms',
    );
    // Neither section without its rows.
    const plain = htmlReport(results([row('fenced')]), chartJs);
    expect(plain).not.toContain('id="catalog"');
    expect(plain).not.toContain('id="settlement-lag"');
  });

  it('draws units sold against a stock line, latency on a log percentile axis, answers by code; then sets ready', () => {
    const { charts, ready } = drawn(htmlReport(results([row('lock'), oversold]), chartJs));
    expect(charts.map((c) => c.canvas)).toEqual(['chart-sold', 'chart-latency', 'chart-codes']);
    expect(ready).toBe('true');

    const [sold, latency, codes] = charts.map((c) => c.config);
    const stockLine = sold.data.datasets.find((d: any) => d.label === 'stock (1,000 units)');
    expect(stockLine.data).toEqual([
      { x: 0, y: 1000 },
      { x: 30, y: 1000 },
    ]);
    const none = sold.data.datasets.find((d: any) => d.label === 'none');
    expect(Math.max(...none.data.map((p: any) => p.y))).toBeGreaterThan(stockLine.data[0].y);

    expect(latency.options.scales.x.type).toBe('logarithmic');
    const lock = latency.data.datasets[0];
    expect(lock.data.map((p: any) => p.y)).toEqual([1.5, 20, 30, 40]);
    expect(lock.data[2].x).toBeCloseTo(100);
    expect(latency.options.scales.x.ticks.callback(1000)).toBe('99.9%');

    expect(codes.data.labels).toEqual(['lock', 'none']);
    expect(codes.data.datasets.map((d: any) => [d.label, d.data])).toEqual([
      ['CREATED', [1000, 1178]],
      ['SOLD_OUT', [4000, 3822]],
    ]);
  });

  // The report: the none line stood at 138 from 0 ms, its first order being at 234 ms.
  it('draws each row as a step after each order: 0 until the first, each rise at an order, none before', () => {
    const lock = row('lock', {
      soldOverTime: [
        { ms: 0, units: 0 },
        { ms: 5, units: 3 },
        { ms: 7, units: 4 },
        { ms: 12, units: 1000 },
      ],
    });
    const none = row('none', {
      ...oversold,
      soldOverTime: [
        { ms: 0, units: 0 },
        { ms: 234, units: 138 },
        { ms: 260, units: 1000 },
        { ms: 260, units: 1100 },
        { ms: 301, units: 1178 },
      ],
    });
    const [sold] = drawn(htmlReport(results([lock, none]), chartJs)).charts.map((c) => c.config);
    const line = (r: Row) => {
      const d = sold.data.datasets.find((set: any) => set.label === r.label);
      return drawnCorners(d.data, d.stepped, d.tension ?? 0);
    };
    for (const r of [lock, none]) {
      expect({ row: r.label, problems: stepProblems(line(r), r.soldOverTime) }).toEqual({ row: r.label, problems: [] });
      expect(line(r).at(-1)).toEqual({ x: r.soldOverTime.at(-1)!.ms, y: r.sold });
    }
    expect(line(none).slice(0, 3)).toEqual([
      { x: 0, y: 0 },
      { x: 234, y: 0 },
      { x: 234, y: 138 },
    ]);
  });

  it("draws each legend item as a stretch of its line, so the stock's shows its dash", () => {
    const [sold] = drawn(htmlReport(results([row('lock'), oversold]), chartJs)).charts.map((c) => c.config);
    const labels = sold.options.plugins.legend.labels;
    expect(labels).toMatchObject({ usePointStyle: true, pointStyle: 'line' });
    const chart = { data: sold.data };
    const items = labels.generateLabels(chart).map((item: any) => [item.text, item.lineDash, item.lineWidth]);
    expect(items).toEqual([
      ['lock', [], 2],
      ['none', [], 2],
      ['stock (1,000 units)', [6, 4], 1.5],
    ]);
  });

  it("shows each row's peak held and its history's verdict in the summary", () => {
    const held = row('fenced', {
      history: historyVerdict(historyReport({ stock: 1000, peak: { units: 1000, ms: START + 12 } }), START),
    });
    const html = htmlReport(results([held, peaked, row('lock')]), chartJs);
    const cells = (label: string) => {
      const tr = new RegExp(`<tr data-strategy="${label}"[^>]*>(.*?)</tr>`).exec(html)![1];
      return ['peak', 'history'].map((name) => new RegExp(`<td class="${name}">([^<]*)</td>`).exec(tr)?.[1]);
    };
    expect(cells('fenced')).toEqual(['1,000', 'holds']);
    expect(cells('none')).toEqual(['200', 'oversell failed (100), falseRefusals failed (7), outsideWrites failed (1)']);
    expect(cells('lock')).toEqual(['-', '-']);
  });

  it('marks the peak above the stock line, the false refusals and the outside writes on the time axis', () => {
    const [sold] = drawn(htmlReport(results([row('lock'), peaked]), chartJs)).charts.map((c) => c.config);
    const set = (label: string) => sold.data.datasets.find((d: any) => d.label === label);
    // The line itself never reaches 200: it is thinned, and the peak's returns came soon after.
    expect(Math.max(...set('none').data.map((p: any) => p.y))).toBe(150);
    expect(set('none: peak 200 units held')).toMatchObject({
      showLine: false,
      pointStyle: 'triangle',
      data: [{ x: 120, y: 200 }],
    });
    expect(set('none: oversold by 100 at its peak').data).toEqual([
      { x: 120, y: 100 },
      { x: 120, y: 200 },
    ]);
    expect(set('stock (100 units)').data[0].y).toBe(100);
    expect(set('none: 7 false refusals')).toMatchObject({
      showLine: false,
      pointStyle: 'crossRot',
      data: [
        { x: 250, y: 0 },
        { x: 260, y: 0 },
      ],
    });
    expect(set('none: 1 writes outside their request')).toMatchObject({
      pointStyle: 'rectRot',
      data: [{ x: 280, y: 0 }],
    });
    // A row without a history, or whose history found nothing of a kind, has no marks of it.
    expect(sold.data.datasets.filter((d: any) => d.label.startsWith('lock:'))).toEqual([]);
    // Each mark's legend item is the mark.
    const items = sold.options.plugins.legend.labels.generateLabels({ data: sold.data });
    expect(items.find((item: any) => item.text === 'none: 7 false refusals').pointStyle).toBe('crossRot');
  });
});

/**
 * The page's own script, run against a stand-in Chart that renders at once: what it
 * asks Chart.js to draw, and the page's ready flag after.
 */
function drawn(html: string): { charts: { canvas: string; config: any }[]; ready?: string } {
  const script = [...html.matchAll(/<script>([^]*?)<\/script>/g)].pop()![1];
  const charts: { canvas: string; config: any }[] = [];
  const body = { dataset: {} as Record<string, string> };
  const document = {
    body,
    getElementById: (id: string) => (id === 'bench-data' ? { textContent: JSON.stringify(embedded(html)) } : id),
  };
  class Chart {
    // Chart.js's own legend items, as it makes them with usePointStyle: styled as the line's first point, no dash.
    static defaults = {
      font: {},
      plugins: {
        legend: {
          labels: {
            generateLabels: (chart: any) =>
              chart.data.datasets.map((d: any, i: number) => ({ text: d.label, datasetIndex: i, lineWidth: 1 })),
          },
        },
      },
    };
    constructor(canvas: string, config: any) {
      charts.push({ canvas, config });
      expect(body.dataset.ready).toBeUndefined();
      for (const plugin of config.plugins ?? []) plugin.afterRender?.(this);
    }
  }
  runInNewContext(script, { document, Chart });
  return { charts, ready: body.dataset.ready };
}

describe('htmlPathFor', () => {
  it('puts the page beside the JSON, named alike', () => {
    expect(htmlPathFor('/tmp/x/r.json')).toBe('/tmp/x/r.html');
    expect(htmlPathFor('bench/results/2026-11-24T08-00-00-000Z.json')).toBe(
      'bench/results/2026-11-24T08-00-00-000Z.html',
    );
    expect(htmlPathFor('/tmp/x/results')).toBe('/tmp/x/results.html');
  });
});
