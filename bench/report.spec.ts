import { failedReport, historyReport, historyVerdict } from '../test/helpers/history-report';
import { historyLine } from './history/check';
import { formatReport, Row } from './report';
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
