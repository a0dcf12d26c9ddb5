import { join } from 'node:path';
import { expectCost, expectRounded, runBench, useBenchDir } from './helpers/bench';

/**
 * What `npm run bench` measures a row against, end to end at a tiny size: the minimal
 * node:http server, the bare Fastify route, and the unlocked control that must oversell
 * (and says so when it cannot). No race needs winning here: the file runs beside others.
 */
describe('bench (scripts/bench.js): baselines and the control', () => {
  jest.setTimeout(120_000);
  const benchDir = useBenchDir();

  it('--baseline runs the minimal node:http server first and gives every row its ratios to it; --workers 1,2 runs both', () => {
    const out = join(benchDir(), 'baseline.json');
    const { run, report } = runBench(
      [
        '--baseline',
        '--strategy',
        'lock',
        '--workers',
        '1,2',
        '--buyers',
        '1000',
        '--stock',
        '20',
        '--connections',
        '100',
        '--warmup',
        '0',
      ],
      out,
      60_000,
    );
    const [baseline, lock, lock2] = report.rows;
    expect(lock2).toMatchObject({ strategy: 'lock', workers: 2, pass: true, sold: 20, stockLeft: 0 });
    expect(run.stdout).toContain('| lock ×2 | PASS |');
    expect(baseline).toMatchObject({
      strategy: 'baseline',
      pass: true,
      sold: 20,
      stockLeft: 0,
      vsBaseline: { throughput: 1, p99: 1 },
    });
    expect(baseline.status).toEqual({ '201': 20, '409': 980 });
    expect(lock).toMatchObject({ strategy: 'lock', pass: true, sold: 20 });
    expectRounded(lock.vsBaseline.throughput, lock.throughput / baseline.throughput, 2);
    expect(run.stdout).toContain('req/s vs baseline');
    // Each row's cost is its own: the baseline server, one app process, a primary and its two workers.
    for (const row of [baseline, lock, lock2]) expectCost(row, 20);
  });

  it('--sold-out-path runs the raw node:http server and the bare Fastify route first, sells nothing, and gives every row its app CPU ratio to the route', () => {
    const out = join(benchDir(), 'sold-out.json');
    const { run, report } = runBench(
      ['--sold-out-path', '--strategy', 'lock', '--buyers', '2000', '--connections', '50', '--warmup', '200'],
      out,
      60_000,
    );
    const [raw, route, lock] = report.rows;
    expect(raw.strategy).toBe('raw-http');
    for (const row of [raw, route, lock]) {
      expect(row).toMatchObject({ stock: 0, sold: 0, pass: true, status: { '409': 2000 }, codes: { SOLD_OUT: 2000 } });
      expectCost(row, 0);
    }
    expect(route).toMatchObject({ strategy: 'fastify-route', vsFastifyRoute: { appCpuPerRequest: 1 } });
    expect(lock.strategy).toBe('lock');
    expectRounded(
      lock.vsFastifyRoute.appCpuPerRequest,
      lock.cost.appCpuUsPerRequest / route.cost.appCpuUsPerRequest,
      2,
    );
    expect(run.stdout).toContain('app CPU vs fastify-route');
    expect(run.stdout).toMatch(
      /sold-out path: lock spends [\d.]+ µs of app CPU per request, the bare Fastify route [\d.]+ µs: [\d.]+x/,
    );
  });

  it('exits 1 when the none control cannot oversell, after trying three sales', () => {
    // Stock above demand: there is nothing to oversell, so the control must come out blind.
    const out = join(benchDir(), 'blind.json');
    const { run, report } = runBench(
      ['--strategy', 'none', '--buyers', '300', '--stock', '1000', '--connections', '50', '--warmup', '0'],
      out,
      60_000,
      1,
    );
    expect(run.status).toBe(1);
    expect(run.stdout).toContain('verdict: none did NOT oversell');
    expect(run.stderr.match(/did not oversell; running it again/g)).toHaveLength(2);
    const [row] = report.rows;
    expect(row).toMatchObject({ strategy: 'none', attempts: 3, oversold: 0, pass: false });
  });
});
