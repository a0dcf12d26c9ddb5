'use strict';
/**
 * A Jest reporter (jest.config.js) that notes each test file's wall time, so that
 * `npm test` can name the slowest files at the end of a run made of several Jest runs
 * (scripts/test.js). It writes only when SECKILL_TEST_TIMINGS names a file: one line per
 * test file, `<seconds>\t<path from the root>`, appended (each of the run's Jest
 * processes adds its own). Zero dependencies, as the other launchers.
 */
const fs = require('node:fs');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');
const ENV = 'SECKILL_TEST_TIMINGS';

class TestTimings {
  onTestResult(_test, result) {
    const file = process.env[ENV];
    if (!file) return;
    const { start, end } = result.perfStats;
    const seconds = (end - start) / 1000;
    fs.appendFileSync(file, `${seconds.toFixed(1)}\t${path.relative(ROOT, result.testFilePath)}\n`);
  }
}

/** The `count` slowest files noted in `file`, as lines to print (none if nothing was noted). */
function slowest(file, count = 10) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const rows = text
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split('\t'))
    .map(([seconds, name]) => ({ seconds: Number(seconds), name }))
    .sort((a, b) => b.seconds - a.seconds)
    .slice(0, count);
  if (rows.length === 0) return [];
  const width = Math.max(...rows.map((r) => r.seconds.toFixed(1).length));
  return [
    `slowest ${rows.length} test files:`,
    ...rows.map((r) => `  ${r.seconds.toFixed(1).padStart(width)} s  ${r.name}`),
  ];
}

module.exports = TestTimings;
module.exports.slowest = slowest;
module.exports.TIMINGS_ENV = ENV;
