import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { bucketsLine, catalogLine, orderLagLine, Row, rowResult, shardSplit, twin } from './report';
import { checksAgainst } from './verdict';

/** What one bench run wrote to its JSON file, as far as the page needs it. */
export interface BenchResults {
  readonly command: string;
  readonly date: string;
  readonly machine: { readonly cpus: number; readonly cpuModel: string; readonly node: string; readonly redis: string };
  readonly rows: readonly Row[];
}

/** `x/r.json` → `x/r.html`: the page sits beside the figures it draws. */
export function htmlPathFor(jsonPath: string): string {
  return `${jsonPath.replace(/\.json$/i, '')}.html`;
}

/** Chart.js's browser build (UMD, minified), to inline: the page must open from a file, offline. */
export function chartJsSource(): string {
  return readFileSync(join(dirname(require.resolve('chart.js')), 'chart.umd.min.js'), 'utf8');
}

const n = (x: number) => x.toLocaleString('en-US');

/** `holds`, or the checks that failed or could not be decided, of the row's history (each product's, with several). */
function historyCell(r: Row): string {
  const reports = r.history ? [r.history] : (r.products ?? []).flatMap((p) => p.history ?? []);
  if (reports.length === 0) return '-';
  const broken = reports.flatMap((h) =>
    checksAgainst(h).map((line) => (r.products ? `${h.productId}: ${line}` : line)),
  );
  return broken.length === 0 ? 'holds' : broken.join(', ');
}

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/**
 * JSON that cannot end its <script> element: every `<` becomes the JSON escape \u003c,
 * so no `</script>` or `<!--` can appear, and JSON.parse gives back the same text.
 */
const embeddedJson = (data: unknown) => JSON.stringify(data).replace(/</g, '\\u003c');

/**
 * The bench's report as one self-contained HTML page: the summary table, and charts of
 * units held over time against the stock, latency by percentile and answers by code,
 * drawn in the browser by Chart.js from the results embedded as JSON. Nothing is
 * fetched: the library is inlined (`chartJs`, see chartJsSource), so the file can be
 * mailed or opened from disk. `document.body.dataset.ready` is 'true' once every chart
 * has been drawn, for a browser test.
 */
export function htmlReport(results: BenchResults, chartJs: string): string {
  const { command, date, machine, rows } = results;
  const body = rows.map(
    (r) =>
      `<tr data-strategy="${escapeHtml(r.label)}"${r.pass ? '' : ' class="failed"'}>` +
      `<th scope="row">${escapeHtml(r.label)}</th>` +
      `<td class="result">${escapeHtml(rowResult(r))}</td>` +
      `<td class="requests">${n(r.requests)}</td>` +
      `<td class="throughput">${n(r.throughput)}</td>` +
      `<td class="p99">${n(r.latency.p99)}</td>` +
      `<td class="stock">${n(r.stock)}</td>` +
      `<td class="sold">${n(r.sold)}</td>` +
      `<td class="stock-left">${n(r.stockLeft)}</td>` +
      `<td class="oversold">${n(r.oversold)}</td>` +
      `<td class="peak">${r.history ? n(r.history.peak.units) : '-'}</td>` +
      `<td class="history">${escapeHtml(historyCell(r))}</td></tr>`,
  );
  // The row it was measured against: the same set-up, telemetry on.
  const onRow = (r: Row) => twin(rows, r, { telemetry: true });
  const telemetry = rows
    .filter((r) => r.vsTelemetryOn)
    .map(
      (r) =>
        `<li>${escapeHtml(r.label)}: ${n(r.throughput)} req/s, ${r.vsTelemetryOn!.throughput.toFixed(2)}× the ` +
        `throughput of ${escapeHtml(onRow(r)?.label ?? r.strategy)} (off/on, same run)</li>`,
    );
  const catalog = rows
    .filter((r) => r.catalog)
    .map(
      (r) =>
        `<li data-strategy="${escapeHtml(r.label)}">${escapeHtml(r.label)}: ${n(r.throughput)} req/s ` +
        `${escapeHtml(catalogLine(r.catalog!))}` +
        (r.vsNoCatalog
          ? `, ${r.vsNoCatalog.throughput.toFixed(2)}× the throughput of ` +
            `${escapeHtml(twin(rows, r, { catalog: 0 })?.label ?? r.strategy)} (with/without, same run; goal ≥ 0.95×)`
          : '') +
        '</li>',
    );
  const buckets = rows
    .filter((r) => r.buckets)
    .map(
      (r) =>
        `<li data-strategy="${escapeHtml(r.label)}">${escapeHtml(r.label)}: ${escapeHtml(bucketsLine(r.buckets!))}` +
        (r.cost.shards.length > 1 ? `; ${escapeHtml(shardSplit(r))}` : '') +
        '</li>',
    );
  const settlementLag = rows
    .filter((r) => r.settlement?.orderLag)
    .map(
      (r) =>
        `<li data-strategy="${escapeHtml(r.label)}">${escapeHtml(r.label)}: ` +
        `${escapeHtml(orderLagLine(r.settlement!.orderLag!))}</li>`,
    );
  const machineText = `Node ${machine.node}, Redis ${machine.redis}, ${machine.cpus} × ${machine.cpuModel}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>seckill bench, ${escapeHtml(date)}</title>
<style>
body { font: 15px/1.5 system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #222; }
code { background: #f3f3f3; padding: 0 .3em; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border-bottom: 1px solid #ddd; padding: .3rem .7rem; text-align: right; }
th[scope=row], thead th:first-child, td.result { text-align: left; }
tr.failed { background: #fde8e8; }
.chart { position: relative; height: 24rem; margin-bottom: 2.5rem; }
.hint { color: #555; margin: .2rem 0 .6rem; }
</style>
</head>
<body>
<h1>seckill bench</h1>
<p>Ran <code id="command">${escapeHtml(command)}</code> on <span id="date">${escapeHtml(date)}</span>,
<span id="machine">${escapeHtml(machineText)}</span>.</p>
<table id="summary">
<thead><tr><th>row</th><th>result</th><th>requests</th><th>req/s</th><th>p99 ms</th><th>stock</th><th>sold</th><th>stock left</th><th>oversold</th><th>peak held</th><th>history</th></tr></thead>
<tbody>
${body.join('\n')}
</tbody>
</table>
<p class="hint">Sold, stock left and oversold are read from Redis after the sale, not from the answers. Peak held is the
most units held at any instant of the order log, and history the checker's verdict on the whole history (each request
and answer, each order and return): units come back, so a sale can end whole after an oversell only the peak shows.
An unsafe row passes when it shows the failure it exists to show.</p>
${telemetry.length > 0 ? `<h2>Telemetry off vs on</h2>\n<ul id="telemetry">\n${telemetry.join('\n')}\n</ul>\n` : ''}${
    catalog.length > 0 ? `<h2>A catalog of idle products</h2>\n<ul id="catalog">\n${catalog.join('\n')}\n</ul>\n` : ''
  }${
    buckets.length > 0
      ? `<h2>Escrow buckets</h2>\n<p class="hint">One product's stock in several buckets, each its own hash tag; a move ` +
        `hands rights from the fullest bucket to a dry one (docs/scaling.md).</p>\n<ul id="buckets">\n${buckets.join('\n')}\n</ul>\n`
      : ''
  }${
    settlementLag.length > 0
      ? `<h2>Settlement lag</h2>\n<p class="hint">Each order's time from its entry in its product's stream to its row in ` +
        `PostgreSQL (<code>order_events.settled_at - at</code>).</p>\n<ul id="settlement-lag">\n${settlementLag.join('\n')}\n</ul>\n`
      : ''
  }<h2>Units held over time</h2>
<p class="hint">Units held: the orders' units less those returned (cancelled, expired), each at its time on Redis's own clock
(the order stream's entry id). The dashed line is the stock: a lock's line climbs to it and stays at or under it; a line
that goes above it held units that did not exist (an oversell), even if returns bring it back under later. A triangle
marks each row's peak by the history checker (the line is thinned to 300 points and can pass between an order and its
return), a vertical bar its oversell above the stock; on the time axis, a cross marks a false refusal (a SOLD_OUT while
units were free during the whole request), a diamond a write outside its request (an order stamped after its request
was answered otherwise, or before it was sent): the first of each, as the report keeps them.</p>
<div class="chart"><canvas id="chart-sold"></canvas></div>
<h2>Latency by percentile</h2>
<p class="hint">Every answer's latency. Read left to right: the middle buyer (50%), then the slowest 1 in 10 (90%),
1 in 100 (99%) and so on to the slowest (100%). The right end is the tail a few buyers wait through.</p>
<div class="chart"><canvas id="chart-latency"></canvas></div>
<h2>Answers by code</h2>
<p class="hint">How every request was answered: CREATED is an order, SOLD_OUT a true refusal. Any 5xx code is a
failure. The scale is logarithmic, so a few orders show beside many refusals.</p>
<div class="chart"><canvas id="chart-codes"></canvas></div>
<script type="application/json" id="bench-data">${embeddedJson(results)}</script>
<script>${chartJs.replace(/<\/(script)/gi, '<\\/$1')}</script>
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`;
}

/**
 * Draws the three charts from the embedded results. Plain browser JavaScript, no
 * template: the data comes from #bench-data alone, so the page and the JSON agree.
 */
const PAGE_SCRIPT = `
'use strict';
(function () {
  var data = JSON.parse(document.getElementById('bench-data').textContent);
  var rows = data.rows;
  var palette = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf', '#bcbd22', '#7f7f7f'];
  var colour = function (i) { return palette[i % palette.length]; };
  var fmt = function (x) { return Number(x).toLocaleString('en-US'); };
  // A log axis labelled at 1, 2 and 5 of each power of ten only: readable, not crowded.
  var logTicks = {
    callback: function (v) {
      var m = v / Math.pow(10, Math.floor(Math.log10(v)));
      return [1, 2, 5].some(function (k) { return Math.abs(m - k) < 1e-9; }) ? fmt(v) : null;
    }
  };
  var charts = 3, drawn = 0;
  // Each chart reports its first drawing; the page is ready when all three have.
  var ready = {
    id: 'ready',
    afterRender: function (chart) {
      if (chart.$drawn) return;
      chart.$drawn = true;
      if (++drawn === charts) document.body.dataset.ready = 'true';
    }
  };
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.font.size = 13;

  var end = 0;
  rows.forEach(function (r) { r.soldOverTime.forEach(function (p) { end = Math.max(end, p.ms); }); });
  var stocks = [];
  rows.forEach(function (r) { if (stocks.indexOf(r.stock) < 0) stocks.push(r.stock); });
  // Each line as a step after each order: two points at an order's instant, the count before it and after it, joined
  // by straight segments (no stepped mode, no curve). So a count holds until the next order and rises at its instant,
  // never before: Chart.js's stepped: 'after' draws each rise at the previous point, and a line stood at its first
  // order's count from 0 ms.
  var steps = function (points) {
    var drawn = [];
    points.forEach(function (p, i) {
      if (i > 0) drawn.push({ x: p.ms, y: points[i - 1].units });
      drawn.push({ x: p.ms, y: p.units });
    });
    return drawn;
  };
  var sold = rows.map(function (r, i) {
    return {
      label: r.label, borderColor: colour(i), backgroundColor: colour(i), borderWidth: 2, pointRadius: 0,
      stepped: false, tension: 0, data: steps(r.soldOverTime)
    };
  }).concat(stocks.map(function (s) {
    return {
      label: 'stock (' + fmt(s) + ' units)', borderColor: '#000', backgroundColor: '#000', borderDash: [6, 4],
      borderWidth: 1.5, pointRadius: 0, data: [{ x: 0, y: s }, { x: Math.max(end, 1), y: s }]
    };
  }));
  // With settlement: each row's orders not yet settled into PostgreSQL, dotted, on the right-hand axis.
  var lag = rows.filter(function (r) { return r.settlement && r.settlement.lag.length; }).map(function (r) {
    var i = rows.indexOf(r);
    return {
      label: r.label + ': not yet settled', borderColor: colour(i), backgroundColor: colour(i), borderDash: [2, 3],
      borderWidth: 1.5, pointRadius: 0, yAxisID: 'y2',
      data: r.settlement.lag.map(function (p) { return { x: p.ms, y: p.unsettled }; })
    };
  });
  // The history checker's marks (bench/history/), on the same axes: instants on Redis's clock less the row's start.
  var historiesOf = function (r) {
    return r.history ? [r.history] : (r.products || []).map(function (p) { return p.history; }).filter(Boolean);
  };
  var MARKS = [['falseRefusals', 'false refusals', 'crossRot'], ['outsideWrites', 'writes outside their request', 'rectRot']];
  var marks = [];
  rows.forEach(function (r, i) {
    var h = r.history;
    // A row of several products draws their total: a product's peak is not on its line.
    if (h && h.peak.ms !== null) {
      var x = Math.max(0, h.peak.ms - h.startMs);
      marks.push({
        label: r.label + ': peak ' + fmt(h.peak.units) + ' units held', borderColor: colour(i), backgroundColor: colour(i),
        pointStyle: 'triangle', pointRadius: 7, showLine: false, data: [{ x: x, y: h.peak.units }]
      });
      if (h.oversell) {
        marks.push({
          label: r.label + ': oversold by ' + fmt(h.oversell.units) + ' at its peak', borderColor: colour(i),
          backgroundColor: colour(i), borderWidth: 4, pointRadius: 0, data: [{ x: x, y: h.stock }, { x: x, y: h.peak.units }]
        });
      }
    }
    MARKS.forEach(function (m) {
      var count = 0, at = [];
      historiesOf(r).forEach(function (k) {
        count += k.counts[m[0]];
        k.findings.forEach(function (f) {
          if (f.check === m[0] && f.ms !== null) at.push({ x: Math.max(0, f.ms - k.startMs), y: 0 });
        });
      });
      if (count === 0) return;
      marks.push({
        label: r.label + ': ' + fmt(count) + ' ' + m[1], borderColor: colour(i), backgroundColor: colour(i),
        pointStyle: m[2], pointRadius: 8, borderWidth: 2, showLine: false, data: at
      });
    });
  });
  sold = sold.concat(lag, marks);
  new Chart(document.getElementById('chart-sold'), {
    type: 'line', data: { datasets: sold }, plugins: [ready],
    options: {
      parsing: false,
      plugins: {
        title: { display: true, text: 'Units held over time: does any line cross the dashed stock line?' },
        // Each legend item a short stretch of its line (a box showed the stock line as a black square). With
        // usePointStyle Chart.js styles the item as the line's first point, which has no dash: the line's own
        // dash, width and colour are put back.
        legend: {
          labels: {
            usePointStyle: true, pointStyle: 'line', pointStyleWidth: 32,
            generateLabels: function (chart) {
              return Chart.defaults.plugins.legend.labels.generateLabels(chart).map(function (item) {
                var d = chart.data.datasets[item.datasetIndex];
                item.lineDash = d.borderDash || [];
                item.lineWidth = d.borderWidth;
                item.strokeStyle = d.borderColor;
                // A mark's item is the mark itself.
                if (d.showLine === false) item.pointStyle = d.pointStyle;
                return item;
              });
            }
          }
        }
      },
      scales: {
        x: { type: 'linear', min: 0, title: { display: true, text: 'ms since the first request (Redis clock)' } },
        y: { type: 'linear', min: 0, title: { display: true, text: 'units held' } },
        y2: {
          type: 'linear', min: 0, position: 'right', display: lag.length > 0, grid: { drawOnChartArea: false },
          title: { display: true, text: 'orders not yet settled into PostgreSQL (dotted)' }
        }
      }
    }
  });

  // HdrHistogram's plot: x is 1 / (1 - p), so 90%, 99%, 99.9% are evenly spaced; the max sits one step past the last.
  var latency = rows.map(function (r, i) {
    var points = [];
    r.latencyByPercentile.forEach(function (p) {
      var x = p.percentile >= 100 ? (points.length ? points[points.length - 1].x * 1.26 : 1) : 1 / (1 - p.percentile / 100);
      points.push({ x: x, y: Math.max(p.ms, 0.01), percentile: p.percentile });
    });
    return { label: r.label, borderColor: colour(i), backgroundColor: colour(i), borderWidth: 2, pointRadius: 0, data: points };
  });
  var percentLabel = function (x) {
    var p = 100 * (1 - 1 / x);
    return (Math.round(p * 1e4) / 1e4) + '%';
  };
  new Chart(document.getElementById('chart-latency'), {
    type: 'line', data: { datasets: latency }, plugins: [ready],
    options: {
      parsing: false,
      interaction: { mode: 'nearest', intersect: false },
      plugins: {
        title: { display: true, text: 'Latency by percentile: how long the slowest 1 in 10, 1 in 100, ... waited' },
        tooltip: { callbacks: { label: function (c) { return c.dataset.label + ': ' + c.raw.percentile + '% within ' + c.raw.y + ' ms'; } } }
      },
      scales: {
        x: {
          type: 'logarithmic', min: 1, title: { display: true, text: 'percentile (log scale of 1 / (1 - p))' },
          ticks: { callback: function (x) { return Math.abs(Math.log10(x) % 1) < 1e-9 ? percentLabel(x) : null; } }
        },
        y: { type: 'logarithmic', ticks: logTicks, title: { display: true, text: 'latency, ms (log scale)' } }
      }
    }
  });

  var codes = [];
  rows.forEach(function (r) { Object.keys(r.codes).forEach(function (c) { if (codes.indexOf(c) < 0) codes.push(c); }); });
  codes.sort(function (a, b) { return a === 'CREATED' ? -1 : b === 'CREATED' ? 1 : a < b ? -1 : 1; });
  new Chart(document.getElementById('chart-codes'), {
    type: 'bar', plugins: [ready],
    data: {
      labels: rows.map(function (r) { return r.label; }),
      datasets: codes.map(function (c, i) {
        return { label: c, backgroundColor: colour(i), data: rows.map(function (r) { return r.codes[c] || null; }) };
      })
    },
    options: {
      plugins: { title: { display: true, text: 'Answers by code, per row: orders (CREATED) beside refusals' } },
      scales: { y: { type: 'logarithmic', ticks: logTicks, title: { display: true, text: 'answers (log scale)' } } }
    }
  });
})();
`;
