import { formatReport, Row } from './report';

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
});
