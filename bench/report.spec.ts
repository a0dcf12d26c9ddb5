import { failedReport, historyReport, historyVerdict } from '../test/helpers/history-report';
import { historyLine } from './history/check';
import { formatReport, Row } from './report';
import { withRatios } from './results';
import type { HistoryVerdict } from './verdict';

const START = 1_700_000_000_000;

/** The demo's none row: 1,339 units held of 1,000 at its peak, 412 ms in; its extra orders expired but 4. */
const demoNone: HistoryVerdict = historyVerdict(
  failedReport(1000, { units: 1339, ms: START + 412 }, 'oversell', [
    { ms: START + 300, orderIds: ['o1001'], detail: '1,001 units held of 1,000 after o1001' },
  ]),
  START,
);

/** A passing row of `strategy` whose Redis work was split over `shares`. */
function row(strategy: string, shares: number[], fields: Partial<Row> = {}): Row {
  const shards = shares.map((share, i) => ({
    node: `127.0.0.1:700${i + 1}`,
    cpuUs: share * 1000,
    cpuUsPerSale: share,
    commands: 10,
    commandsPerSale: 1,
    share,
  }));
  return {
    strategy,
    label: strategy,
    unsafe: false,
    workers: 1,
    buyers: 10,
    requests: 10,
    durationMs: 100,
    throughput: 100,
    latency: { p50: 1, p90: 1, p99: 1, max: 1 },
    status: { '201': 3, '409': 7 },
    sold: 3,
    stock: 3,
    stockLeft: 0,
    oversold: 0,
    distinctBuyers: 3,
    sellOutMs: 30,
    salesPerSec: 100,
    invariants: { noOversell: true },
    problems: [],
    cost: {
      appCpuUsPerRequest: null,
      redisCpuUsPerRequest: 1,
      redisCpuUsPerSale: 1,
      redisCommandsPerSale: 1,
      salesPerSecCeiling: 1,
      shards,
    },
    pass: true,
    ...fields,
  } as unknown as Row;
}

describe('formatReport', () => {
  it('shows each row’s Redis CPU split over several nodes on one line, and none for one node', () => {
    const { text } = formatReport([row('lock', [0.342, 0.331, 0.327]), row('atomic', [1])]);
    expect(text).toContain(
      'per-shard CPU split: lock: shard 127.0.0.1:7001 34% · 127.0.0.1:7002 33% · 127.0.0.1:7003 33%',
    );
    expect(text).not.toContain('per-shard CPU split: atomic');
  });

  it('on several nodes, gives each shard of a row its Redis CPU per sale and the ceiling its busiest sets', () => {
    const one = row('fenced', [22.2, 0.4, 0.4]);
    const three = row('fenced', [13.9, 13.8, 11], {
      label: 'fenced buckets-3',
      buckets: { count: 3, ids: ['hot', 'hot~1', 'hot~4'], moves: 8, cluster: true },
    });
    const { text } = formatReport([one, three, row('atomic', [1])]);
    expect(text).toContain(
      '| strategy | shard | Redis CPU µs/sale | Redis cmds/sale | share | sales/s ceiling (busiest shard) |',
    );
    // 1 s / 22.2 µs and 1 s / 13.9 µs.
    expect(text).toContain('| fenced | 127.0.0.1:7001 | 22.2 | 1.00 | 2220% | 45,045 |');
    expect(text).toContain('| fenced buckets-3 | 127.0.0.1:7003 | 11.0 | 1.00 | 1100% | 71,942 |');
    expect(text).not.toContain('| atomic | 127.0.0.1:7001 |');
    expect(text).toContain(
      '\nbuckets: fenced buckets-3: 3 buckets (hot, hot~1, hot~4) on a Redis Cluster; 8 moves of rights into them',
    );
    expect(formatReport([row('atomic', [1])]).text).not.toContain('| shard |');
  });

  it('gives each product of a row its own line, and fails a safe row whose product failed', () => {
    const product = (id: string, pass: boolean) => ({
      id,
      stock: 1,
      requests: 5,
      status: { '201': pass ? 1 : 2 },
      sold: pass ? 1 : 2,
      stockLeft: pass ? 0 : -1,
      oversold: pass ? 0 : 1,
      sellOutMs: 10,
      invariants: { noOversell: pass },
      pass,
    });
    const failing = row('lock', [1], {
      products: [product('p1', true), product('p2', false)] as unknown as Row['products'],
      invariants: { noOversell: false } as Row['invariants'],
      problems: ['p2: oversell: ...'],
      pass: false,
    });
    const { text, failed } = formatReport([failing]);
    expect(failed).toBe(true);
    expect(text).toMatch(/\| lock \| p1 \| PASS \| 5 \| 1 \|/);
    expect(text).toMatch(/\| lock \| p2 \| FAIL \(noOversell\) \| 5 \| 2 \|/);
    expect(text).toContain('verdict: lock FAILED: p2: oversell');
  });

  it('names a telemetry-off row so, and states its off/on throughput ratio against the same strategy with telemetry on', () => {
    const on = row('fenced', [1], { telemetry: true, throughput: 1000 });
    const off = row('fenced', [1], {
      label: 'fenced telemetry-off',
      telemetry: false,
      throughput: 1040,
      vsTelemetryOn: { throughput: 1.04 },
    });
    const { text } = formatReport([on, off]);
    expect(text).toContain('| fenced telemetry-off | PASS | 1,040 |');
    expect(text).toContain('verdict: fenced telemetry-off sold 3 of 3');
    expect(text).toContain(
      'telemetry: fenced telemetry-off served 1,040 req/s, with it on 1,000: off/on throughput 1.04x (same run)',
    );
  });

  it('compares a row with a catalog to its twin without one (same options otherwise), and says so', () => {
    const catalog = { products: 10_000, listed: 10_000, listMs: 4120 };
    const rows = withRatios([
      row('fenced', [1], { telemetry: true, settle: true, throughput: 1000 }),
      row('fenced', [1], { label: 'fenced settle-off', telemetry: true, settle: false, throughput: 2000 }),
      row('fenced', [1], { label: 'fenced catalog-10000', telemetry: true, settle: true, throughput: 970, catalog }),
      row('fenced', [1], {
        label: 'fenced settle-off catalog-10000',
        telemetry: true,
        settle: false,
        throughput: 1500,
        catalog,
      }),
    ]);
    // Each against the row with its own settle value: not the first fenced row found.
    expect(rows.map((r) => r.vsNoCatalog)).toEqual([undefined, undefined, { throughput: 0.97 }, { throughput: 0.75 }]);
    // And settlement's ratio pairs the catalog rows with each other, not with the row without one.
    expect(rows.map((r) => r.vsSettleOff)).toEqual([{ throughput: 0.5 }, undefined, { throughput: 0.65 }, undefined]);
    const { text } = formatReport(rows);
    expect(text).toContain('| fenced catalog-10000 | PASS | 970 |');
    expect(text).toContain(
      "catalog: fenced catalog-10000 served 970 req/s with 10,000 idle products listed (through the admin API in 4,120 ms; 10,000 in Redis's products set); " +
        'fenced without them 1,000: with/without throughput 0.97x (same run; goal >= 0.95x)',
    );
    expect(text).toContain('catalog: fenced settle-off catalog-10000 served 1,500 req/s');
    expect(text).toContain('fenced settle-off without them 2,000: with/without throughput 0.75x');
  });

  it("states each settling row's order lag percentiles, and which clocks they were read on", () => {
    const settlement = (orderLag: unknown) => ({ drainMs: 12, rows: 3, byStatus: { reserved: 3 }, lag: [], orderLag });
    const { text } = formatReport([
      row('fenced', [1], {
        settle: true,
        settlement: settlement({ orders: 3, p50: 12.5, p99: 98, max: 101.2, clock: 'one machine' }),
      } as Partial<Row>),
      row('lock', [1], {
        settle: true,
        settlement: settlement({ orders: 1000, p50: 40, p99: 120, max: 130, clock: { skewMs: -3 } }),
      } as Partial<Row>),
      row('atomic', [1], { settle: false }),
    ]);
    expect(text.split('\n').filter((line) => line.startsWith('settlement lag: '))).toEqual([
      "settlement lag: fenced p50 12.5 ms, p99 98 ms, max 101.2 ms from each of 3 orders' stream entry to its row in PostgreSQL " +
        "(goal: p99 <= 100 ms; Redis's and PostgreSQL's clocks are one machine's)",
      "settlement lag: lock p50 40 ms, p99 120 ms, max 130 ms from each of 1,000 orders' stream entry to its row in PostgreSQL " +
        "(goal: p99 <= 100 ms; Redis's clock brought to this machine's by the skew measured at the sale's start, -3 ms)",
    ]);
  });

  it('reports the none control oversold by its peak, at its time, and its end beside it', () => {
    const none = row('none', [1], {
      unsafe: true,
      stock: 1000,
      sold: 1004,
      stockLeft: -4,
      oversold: 4,
      history: demoNone,
      invariants: { noOversell: false, history: false } as Row['invariants'],
    });
    const { text, failed } = formatReport([none]);
    expect(text).toContain(
      "verdict: none oversold by 339 at its peak (1,339 units held of 1,000, 412 ms after the first request (Redis's clock)); " +
        '4 at the end (1,004 units sold of 1,000) — expected: it is unsafe',
    );
    expect(failed).toBe(false);
  });

  it('counts a none control whose oversell had gone by the end as seen, and one that never oversold as blind', () => {
    const ended = { unsafe: true, sold: 1000, stock: 1000, stockLeft: 0, oversold: 0 };
    const returned = row('none', [1], {
      ...ended,
      history: demoNone,
      invariants: { noOversell: true, history: false } as Row['invariants'],
    });
    expect(formatReport([returned]).failed).toBe(false);
    expect(formatReport([returned]).text).toContain('verdict: none oversold by 339 at its peak');
    const blind = row('none', [1], {
      ...ended,
      history: historyVerdict(historyReport({ stock: 1000, peak: { units: 1000, ms: START + 5 } }), START),
      invariants: { noOversell: true, history: true } as Row['invariants'],
    });
    const { text, failed } = formatReport([blind]);
    expect(failed).toBe(true);
    expect(text).toContain('verdict: none did NOT oversell');
  });

  it("prints each row's history line, each product's with several, and fails a safe row its history fails", () => {
    const held = historyVerdict(historyReport({ stock: 3, peak: { units: 3, ms: START + 30 } }), START);
    const refused: HistoryVerdict = historyVerdict(
      failedReport(3, { units: 3, ms: START + 30 }, 'falseRefusals', [
        { ms: START + 50, orderIds: [], userId: 'b7', detail: 'SOLD_OUT to b7 while 1 unit was free all along' },
      ]),
      START,
      { productId: 'p2' },
    );
    const sold = { requests: 10, status: { '201': 3 }, sold: 3, stock: 3, stockLeft: 0, oversold: 0, sellOutMs: 30 };
    const fenced = row('fenced', [1], { history: held, invariants: { noOversell: true, history: true } as never });
    const products = row('lock', [1], {
      products: [
        { ...sold, id: 'p1', history: { ...held, productId: 'p1' }, invariants: { history: true }, pass: true },
        { ...sold, id: 'p2', history: refused, invariants: { history: false }, pass: false },
      ] as unknown as Row['products'],
      invariants: { history: false } as Row['invariants'],
      problems: ['p2: history: falseRefusals failed (1)'],
      pass: false,
    });
    const { text, failed } = formatReport([fenced, products]);
    expect(text.split('\n').filter((line) => line.startsWith('history: '))).toEqual([
      `history: fenced: ${historyLine(held, START)}`,
      `history: lock p1: ${historyLine({ ...held, productId: 'p1' }, START)}`,
      `history: lock p2: ${historyLine(refused, START)}`,
    ]);
    expect(failed).toBe(true);
    expect(text).toContain('verdict: lock FAILED: p2: history: falseRefusals failed (1)');
  });
});
