'use strict';
/**
 * `npm test`: install and build if needed, make sure redis-server exists (the tests
 * start their own on free ports) and Chromium if it can (the browser tests are skipped
 * without it), then run every Jest test. Extra arguments go to Jest:
 * `npm test -- test/api.e2e-spec.ts`. Either way it ends by naming the 10 slowest test
 * files, with their seconds.
 */
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { ROOT, log, launch } = require('./launch');
const { slowest, TIMINGS_ENV } = require('./test-timings');

function main() {
  const jest = path.join(ROOT, 'node_modules', 'jest', 'bin', 'jest.js');
  // NestJS 12 ships only as ES modules. Jest 30 loads them with Node's own require(esm)
  // (Node 24.9+), which needs vm.SourceTextModule: --experimental-vm-modules. Its one
  // warning per worker says nothing the run needs.
  const node = ['--experimental-vm-modules', '--disable-warning=ExperimentalWarning'];
  // Every Jest run notes its files' wall times here (scripts/test-timings.js, a reporter).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seckill-test-'));
  const timings = path.join(dir, 'timings.tsv');
  const env = { ...process.env, [TIMINGS_ENV]: timings };
  const run = (args) =>
    spawnSync(process.execPath, [...node, jest, ...args], { cwd: ROOT, stdio: 'inherit', env }).status ?? 1;
  const start = (args, stdio) => spawn(process.execPath, [...node, jest, ...args], { cwd: ROOT, stdio, env });
  const began = Date.now();
  const finish = (status) => {
    const lines = slowest(timings, 10);
    fs.rmSync(dir, { recursive: true, force: true });
    if (lines.length > 0) {
      process.stderr.write(`\n${lines.join('\n')}\n`);
      log(`tests ran in ${Math.round((Date.now() - began) / 1000)} s`);
    }
    process.exit(status);
  };

  const args = process.argv.slice(2);
  if (args.length > 0) finish(run(args));
  else void runEverything(run, start).then(finish);
}

// Everything, in three passes, arranged so that no core idles while a suite sleeps:
//
// 1. The rest, three files at a time. Most of a file's time is spent waiting (on real TTLs,
//    windows, restarts, the app's start-up): two at a time, these files took 160 s and a
//    little over half the two cores; four at a time, half that, each file about as long.
// 2. HEAVY one after the other, and beside them, two at a time, SLEEPY. The sales that
//    must be won or lost by a race (the bench's unlocked control must oversell; the fault
//    suite's pauses and kills; the lab in Chromium that runs both; the report drawn from
//    such a sale): run beside each other on two cores, the `none` control once failed to
//    show its oversell. So they never run beside each other, nor beside a busy file: only
//    beside SLEEPY, files that spend their time waiting on real TTLs, claims, replicas and
//    restarts of Redis (measured alone: idempotency.e2e and cluster-launcher.e2e use
//    about a seventh of one core, replicas.e2e a quarter, network.e2e and redis-startup.e2e
//    less than half). settlement.e2e is not one: beside HEAVY it took twice as long. The
//    bench's options and baselines (bench-options.e2e, bench-baselines.e2e) and the lab's
//    API (lab.e2e) win or lose no race: they run with the rest.
// 3. The start:dev test, beside WITHOUT_DIST only, three at a time: `nest start --watch`
//    deletes and rebuilds dist/, which every other file runs (as the built app, the
//    bench, or a launcher that builds it when missing). The unit specs (`*.spec.ts`, not
//    `*.e2e-spec.ts`) run nothing from dist/ or scripts/, so they fill this pass.
// Three, not four, on two cores: most of these files wait, but some hold a real window
// (a put and a buy inside 1.5 s, a pay racing an expiry) that a starved worker could
// outlast.
const WORKERS = '3';
const HEAVY = [
  'test/bench.e2e-spec.ts',
  'test/report-browser.e2e-spec.ts',
  'test/faults.e2e-spec.ts',
  'test/lab-browser.e2e-spec.ts',
];
const SLEEPY = [
  'test/redis-startup.e2e-spec.ts',
  'test/idempotency.e2e-spec.ts',
  'test/cluster-launcher.e2e-spec.ts',
  'test/replicas.e2e-spec.ts',
  'test/network.e2e-spec.ts',
];
const WATCH = 'test/watch.e2e-spec.ts';
/** Apps in the test process and Redis only: nothing from dist/ or scripts/start.js (patterns, as Jest takes them). */
const WITHOUT_DIST = ['test/cluster.e2e-spec.ts', '\\.spec\\.ts$'];

/** Runs the three passes, saying how long each took; resolves to the run's exit status. */
async function runEverything(run, start) {
  let since = Date.now();
  const took = (pass) => {
    log(`${pass}: ${Math.round((Date.now() - since) / 1000)} s`);
    since = Date.now();
  };
  const rest = run([
    '--maxWorkers',
    WORKERS,
    '--testPathIgnorePatterns',
    '/node_modules/',
    '/dist/',
    ...HEAVY,
    ...SLEEPY,
    WATCH,
    ...WITHOUT_DIST,
  ]);
  took('pass 1, the rest');
  // SLEEPY's report waits for HEAVY's end, so the two never interleave line by line.
  const sleepy = captured(start(['--maxWorkers', '2', ...SLEEPY], ['ignore', 'pipe', 'pipe']));
  const heavy = await exited(start(['--runInBand', ...HEAVY], 'inherit'));
  const beside = await sleepy;
  process.stdout.write(beside.stdout);
  process.stderr.write(beside.stderr);
  took('pass 2, HEAVY beside SLEEPY');
  const last = run(['--maxWorkers', WORKERS, WATCH, ...WITHOUT_DIST]);
  took('pass 3, start:dev beside WITHOUT_DIST');
  return rest || heavy || beside.status || last;
}

/** A child's exit status, once it has exited. */
function exited(child) {
  return new Promise((resolve) => child.once('close', (code) => resolve(code ?? 1)));
}

/** A child's exit status and everything it wrote, once it has exited. */
function captured(child) {
  const out = [];
  const err = [];
  child.stdout.on('data', (d) => out.push(d));
  child.stderr.on('data', (d) => err.push(d));
  return new Promise((resolve) =>
    child.once('close', (code) =>
      resolve({ status: code ?? 1, stdout: Buffer.concat(out), stderr: Buffer.concat(err) }),
    ),
  );
}

launch(
  {
    // The Node that runs the tests, said in the log. 24.9 at least: Jest 30 loads NestJS 12's
    // ES modules with the require(esm) of Node 24.9+ (vm modules that evaluate synchronously).
    node: { announce: true, min: '24.9' },
    // The tests start their own redis-server and PostgreSQL servers; the browser tests
    // are skipped without Chromium, the --target test behind nginx without nginx; the process, bench and fault tests run the built app
    // and bench as real processes.
    redis: true,
    postgres: true,
    chromium: true,
    nginx: true,
  },
  main,
);
