import { CONFIG_DEFAULTS } from '../src/config/app-config';
import { BEGIN, END, judgeTargets, replaceSection } from './performance';
import type { Row } from './report';

type Report = Parameters<typeof judgeTargets>[0];

function row(strategy: string, workers: number, fields: Partial<Row>): Row {
  return { strategy, workers, pass: true, throughput: 1000, salesPerSec: 100, ...fields } as Row;
}

function report(rows: Row[]): Report {
  return {
    command: 'npm run bench -- x',
    date: '2026-11-21T00:00:00Z',
    machine: { cpus: 2, cpuModel: 'cpu', node: 'v20', redis: '7' },
    rows,
  };
}

describe('README Performance section', () => {
  it('replaces only what is between the markers, and appends a section when there is none', () => {
    const readme = `# seckill\n\n## Performance\n\nintro\n\n${BEGIN}\nold table\n${END}\n\n## Next\n`;
    const once = replaceSection(readme, `${BEGIN}\nnew table\n${END}`);
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
    const contended = report([row(measured, 1, { salesPerSec: 4000 }), row('atomic', 1, { salesPerSec: 4500 })]);
    expect(judgeTargets(headline, contended).map((t) => [t.met, t.measured])).toEqual([
      [false, '0.60x'],
      [true, '1.10x'],
      [true, '0.89x (4000 vs 4500)'],
      [false, 'invariants hold, 0.83x (5000 vs 6000 req/s)'],
    ]);
    expect(judgeTargets(headline, contended)[0].goal).toBe(`headline: \`${measured}\` throughput >= 1.0x the baseline`);
    const broken = report([...headline.rows.slice(0, 2), row(measured, 2, { throughput: 9000, pass: false })]);
    expect(judgeTargets(broken, contended)[3]).toMatchObject({
      met: false,
      measured: expect.stringContaining('INVARIANT BROKEN'),
    });
  });
});
