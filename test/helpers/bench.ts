import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
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
