import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const BENCH = join(ROOT, 'scripts', 'bench.js');

/**
 * Runs `npm run bench` (scripts/bench.js) with `args` and `--out out`, and expects it to
 * exit `status` (showing what it said if not); returns its output and the report it wrote.
 */
export function runBench(args: string[], out: string, timeout: number, status = 0) {
  const run = spawnSync(process.execPath, [BENCH, ...args, '--out', out], { cwd: ROOT, encoding: 'utf8', timeout });
  expect({ status: run.status, output: run.status === status ? '' : `${run.stdout}\n${run.stderr}` }).toEqual({
    status,
    output: '',
  });
  return { run, report: JSON.parse(readFileSync(out, 'utf8')) };
}

/** True while something accepts TCP connections on the port. */
export function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The ports `output` names in `pattern`'s first group. */
export const ports = (output: string, pattern: RegExp): number[] =>
  [...output.matchAll(pattern)].map((m) => Number(m[1]));

/**
 * `shown` is `exact` rounded to `decimals`: within half a step, the edge included
 * (toBeCloseTo's strict bound fails 16.45 shown as 16.5, a rounding it should accept).
 */
export function expectRounded(shown: number, exact: number, decimals: number): void {
  expect(Math.abs(shown - exact)).toBeLessThanOrEqual(0.5 * 10 ** -decimals + 1e-9);
}

/**
 * A row's cost figures (bench/cost.ts) are there and make sense: CPU and commands are
 * positive and finite; the per-sale ones exist exactly when something was sold. The
 * bare Fastify route sends Redis nothing, so its Redis figure may be 0 (Redis's idle work).
 */
export function expectCost(row: { strategy: string; cost: Record<string, any> }, sold: number): void {
  const { measured, shards, ...figures } = row.cost;
  const perSale = ['redisCpuUsPerSale', 'redisCommandsPerSale', 'salesPerSecCeiling'];
  for (const [name, value] of Object.entries(figures)) {
    const label = `${row.strategy}: cost.${name}`;
    const idle = row.strategy === 'fastify-route' && name === 'redisCpuUsPerRequest';
    if (sold === 0 && perSale.includes(name)) expect({ [label]: value }).toEqual({ [label]: null });
    else expect({ [label]: Number.isFinite(value) && (idle ? value >= 0 : value > 0) }).toEqual({ [label]: true });
  }
  expect(Object.keys(figures).sort()).toEqual(['appCpuUsPerRequest', 'redisCpuUsPerRequest', ...perSale].sort());
  expect(measured.sold).toBe(sold);
  // One Redis server: one shard, with all of the pass's Redis CPU and commands.
  expect(shards).toHaveLength(1);
  expect(shards[0]).toMatchObject({ node: expect.stringMatching(/^127\.0\.0\.1:\d+$/), share: 1 });
  // redisCpuMs is rounded to 0.1 ms (16,450 µs is 16.5).
  expectRounded(measured.redisCpuMs, shards[0].cpuUs / 1000, 1);
  expect(shards[0].commands).toBe(
    Object.values(measured.redisCommands as Record<string, number>).reduce((a, b) => a + b, 0),
  );
}

/** A temporary folder for the describe's bench reports, made before its tests and removed after them. */
export function useBenchDir(): () => string {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'seckill-bench-test-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return () => dir;
}
