'use strict';
/**
 * `npm test`: install and build if needed, make sure redis-server exists (the tests
 * start their own on free ports) and Chromium if it can (the browser tests are skipped
 * without it), then run every Jest test. Extra arguments go to Jest:
 * `npm test -- test/api.e2e-spec.ts`.
 */
const { spawnSync } = require('node:child_process');
const path = require('node:path');
const { ROOT, log, relaunchOnSupportedNode, ensureDependencies, ensureBuilt } = require('./setup');
const { provideChromium } = require('./chromium');
const { provideRedisServerOrExit } = require('./redis-server');
const { ensurePostgres } = require('./postgres-server');

// The Node that runs the tests, said in the log. 24.9 at least: Jest 30 loads NestJS 12's
// ES modules with the require(esm) of Node 24.9+ (vm modules that evaluate synchronously).
if (!relaunchOnSupportedNode({ announce: true, min: '24.9' })) main();

function main() {
  ensureDependencies();
  provideRedisServerOrExit(log);
  // The settlement tests start their own PostgreSQL servers, as they do redis-server.
  ensurePostgres(log);
  provideChromium(log);
  // The process, bench and fault tests run the built app and bench as real processes.
  ensureBuilt();
  const jest = path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js');
  // NestJS 12 ships only as ES modules. Jest 30 loads them with Node's own require(esm)
  // (Node 24.9+), which needs vm.SourceTextModule: --experimental-vm-modules. Its one
  // warning per worker says nothing the run needs.
  const node = ['--experimental-vm-modules', '--disable-warning=ExperimentalWarning'];
  const run = (args) =>
    spawnSync(process.execPath, [...node, jest, ...args], { cwd: ROOT, stdio: 'inherit' }).status ?? 1;

  const args = process.argv.slice(2);
  if (args.length > 0) process.exit(run(args));
  // Everything, in two passes. The suites that load the machine with whole apps under
  // burst (the bench and the fault suite) measure races and pauses: run beside each
  // other on two cores, the `none` control once failed to show its oversell. So the
  // rest runs two files at a time, then these run one after the other. The start:dev
  // test is among them because `nest start --watch` deletes and rebuilds dist/, which
  // the others run.
  const HEAVY = [
    'test/bench.e2e-spec.ts',
    'test/report-browser.e2e-spec.ts',
    'test/faults.e2e-spec.ts',
    'test/lab.e2e-spec.ts',
    'test/lab-browser.e2e-spec.ts',
    'test/watch.e2e-spec.ts',
  ];
  const first = run(['--testPathIgnorePatterns', '/node_modules/', '/dist/', ...HEAVY]);
  const second = run(['--runInBand', ...HEAVY]);
  process.exit(first || second);
}
