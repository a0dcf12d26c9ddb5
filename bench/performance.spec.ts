import { CONFIG_DEFAULTS } from '../src/config/app-config';
import { BEGIN, END, judgeTargets, replaceSection } from './performance';
import type { Row } from './report';

type Report = Parameters<typeof judgeTargets>[0];

function row(strategy: string, workers: number, fields: Partial<Row>, cost: Partial<Row['cost']> = {}): Row {
  const measured = { appCpuUsPerRequest: 100, redisCpuUsPerRequest: 5, redisCpuUsPerSale: 30, ...cost };
  return { strategy, workers, pass: true, throughput: 1000, salesPerSec: 100, ...fields, cost: measured } as Row;
}

function report(rows: Row[]): Report {
  return {
    command: 'npm run bench -- x',
    date: '2026-11-21T00:00:00Z',
    machine: { cpus: 2, cpuModel: 'cpu', node: 'v20', redis: '7' },
    rows,
  };
}

describe("docs/performance.md's measured section", () => {
  it('replaces only what is between the markers, and appends a section when there is none', () => {
    const page = `# seckill\n\n## Performance\n\nintro\n\n${BEGIN}\nold table\n${END}\n\n## Next\n`;
    const once = replaceSection(page, `${BEGIN}\nnew table\n${END}`);
    expect(once).toBe(`# seckill\n\n## Performance\n\nintro\n\n${BEGIN}\nnew table\n${END}\n\n## Next\n`);
    expect(replaceSection(once, `${BEGIN}\nnew table\n${END}`)).toBe(once);
    expect(replaceSection('# seckill\n', `${BEGIN}\nt\n${END}`)).toBe(
      `# seckill\n\n## Performance\n\n${BEGIN}\nt\n${END}\n`,
    );
  });

  it('judges each target for the default strategy from the ratios of one run, and says which are missed', () => {
    const measured = CONFIG_DEFAULTS.lockStrategy;
    const headline = report([
      row('baseline', 1, {}),
      row(measured, 1, { throughput: 6000, vsBaseline: { throughput: 0.6, p99: 1.1 } }),
      row(measured, 2, { throughput: 5000, vsBaseline: { throughput: 0.5, p99: 2 } }),
    ]);
    const contended = report([
      row('baseline', 1, { salesPerSec: 5000 }, { appCpuUsPerRequest: 40 }),
      row(measured, 1, { salesPerSec: 4200, settle: false }, { appCpuUsPerRequest: 58 }),
      row(measured, 1, { salesPerSec: 4000, settle: true }, { redisCpuUsPerSale: 24.5, appCpuUsPerRequest: 62 }),
      row('atomic', 1, { salesPerSec: 4500, settle: true }, { redisCpuUsPerSale: 28 }),
    ]);
    const soldOut = report([
      row('raw-http', 1, {}, { appCpuUsPerRequest: 100 }),
      row('fastify-route', 1, {}, { appCpuUsPerRequest: 120 }),
      row(measured, 1, {}, { appCpuUsPerRequest: 180 }),
    ]);
    expect(judgeTargets(headline, contended, soldOut).map((t) => [t.met, t.measured])).toEqual([
      [false, '0.60x'],
      [false, '1.10x'],
      [false, '0.89x (4000 vs 4500)'],
      [false, `0.84x (4200 vs 5000; app CPU per purchase 58 vs 40 µs); settling \`${measured}\` 0.80x (4000)`],
      [false, '1.50x (180 vs 120 µs)'],
      [false, '1.80x (180 vs 100 µs)'],
      [true, '0.88x (24.5 vs 28 µs)'],
      [false, 'invariants hold, 0.83x (5000 vs 6000 req/s)'],
    ]);
    expect(judgeTargets(headline, contended, soldOut)[0].goal).toBe(
      `headline: \`${measured}\` throughput >= 1.0x the baseline`,
    );
    const broken = report([...headline.rows.slice(0, 2), row(measured, 2, { throughput: 9000, pass: false })]);
    expect(judgeTargets(broken, contended, soldOut)[7]).toMatchObject({
      met: false,
      measured: expect.stringContaining('INVARIANT BROKEN'),
    });
  });

  it('judges the raw baseline against the row that settles nothing either, and the rest on the settling rows; without a settle-off row it refuses to judge', () => {
    const measured = CONFIG_DEFAULTS.lockStrategy;
    const headline = report([
      row(measured, 1, { throughput: 6000, vsBaseline: { throughput: 1, p99: 1 } }),
      row(measured, 2, { throughput: 6000 }),
    ]);
    // In the order the bench runs them (--settle off,on).
    const rows = [
      row('baseline', 1, { salesPerSec: 5000 }, { appCpuUsPerRequest: 40 }),
      row(measured, 1, { salesPerSec: 4600, settle: false }, { appCpuUsPerRequest: 50, redisCpuUsPerSale: 20 }),
      row(measured, 1, { salesPerSec: 4000, settle: true }, { appCpuUsPerRequest: 70, redisCpuUsPerSale: 40 }),
      row('atomic', 1, { salesPerSec: 4500, settle: false }, { redisCpuUsPerSale: 25 }),
      row('atomic', 1, { salesPerSec: 4400, settle: true }, { redisCpuUsPerSale: 30 }),
    ];
    const soldOut = report([
      row('raw-http', 1, {}, { appCpuUsPerRequest: 100 }),
      row('fastify-route', 1, {}, { appCpuUsPerRequest: 100 }),
      row(measured, 1, {}, { appCpuUsPerRequest: 100 }),
    ]);
    const targets = judgeTargets(headline, report(rows), soldOut);
    const [, , vsAtomic, vsRaw, , , redis] = targets.map((t) => [t.met, t.measured]);
    expect([vsAtomic, vsRaw, redis]).toEqual([
      [false, '0.91x (4000 vs 4400)'],
      [true, `0.92x (4600 vs 5000; app CPU per purchase 50 vs 40 µs); settling \`${measured}\` 0.80x (4000)`],
      [false, '1.33x (40 vs 30 µs)'],
    ]);
    expect(targets[3].goal).toContain(`\`${measured} settle-off\``);
    const noBareRow = report(rows.filter((r) => !(r.strategy === measured && r.settle === false)));
    expect(() => judgeTargets(headline, noBareRow, soldOut)).toThrow(`no settle-off ${measured} row`);
    const noSettlingRow = report(rows.filter((r) => !(r.strategy === measured && r.settle === true)));
    expect(() => judgeTargets(headline, noSettlingRow, soldOut)).toThrow(`no settling ${measured} row`);
  });

  it('meets the ratio targets at their bounds, and misses a cost target that was not measured', () => {
    const measured = CONFIG_DEFAULTS.lockStrategy;
    const headline = report([
      row(measured, 1, { throughput: 6000, vsBaseline: { throughput: 1, p99: 1 } }),
      row(measured, 2, { throughput: 6000 }),
    ]);
    const contended = report([
      row('baseline', 1, {}),
      row(measured, 1, { settle: false }),
      row(measured, 1, { settle: true }),
      row('atomic', 1, { settle: true }),
    ]);
    const soldOut = report([
      row('raw-http', 1, {}, { appCpuUsPerRequest: 100 }),
      row('fastify-route', 1, {}, { appCpuUsPerRequest: 100 }),
      row(measured, 1, {}, { appCpuUsPerRequest: 120 }),
    ]);
    expect(judgeTargets(headline, contended, soldOut).every((t) => t.met)).toBe(true);
    // Without /proc there is no app CPU; a sale that sold nothing has no Redis CPU per sale.
    const blind = report([
      row('raw-http', 1, {}, { appCpuUsPerRequest: 100 }),
      row('fastify-route', 1, {}, { appCpuUsPerRequest: null }),
      row(measured, 1, {}),
    ]);
    const unsold = report([
      row('baseline', 1, {}),
      row(measured, 1, { settle: false }),
      row(measured, 1, {}, { redisCpuUsPerSale: null }),
      row('atomic', 1, {}),
    ]);
    expect(
      judgeTargets(headline, unsold, blind)
        .filter((t) => !t.met)
        .map((t) => t.measured),
    ).toEqual(['not measured (no /proc, or too few requests for its 10 ms ticks)', 'not measured (nothing sold)']);
  });
});
