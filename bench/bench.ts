/**
 * The flash-sale bench: fires N distinct buyers at the real service, one fresh app
 * (or cluster of apps) per strategy, then reads the verdict from Redis itself.
 *
 *   npm run bench -- --buyers 100000 --connections 1000 --stock 1000 --strategy lock,none
 *
 * Exit code 1 when a safe strategy breaks an invariant, or when the `none` control
 * fails to oversell (a bench that cannot see overselling proves nothing).
 *
 * The runner: a row per target and option value, each a fresh app (bench/rows.ts),
 * warmed up, one measured sale (bench/measured-sale.ts, its kinds in bench/scenarios/),
 * judged; then the report (bench/results.ts, bench/report.ts).
 */
import { relative } from 'node:path';
import { runToExit } from './entry-point';
import { measuredSale, toRow } from './measured-sale';
import { parseOptions, USAGE, UsageError } from './options';
import { formatReport, Row } from './report';
import { queueComparisons, withRatios, writeResults } from './results';
import { listCatalog } from './catalog';
import { catalogs, cleanUp, prepare, RowSpec, Run, startTarget, warmUp } from './rows';
import { redactUrls } from './redact';
import { benchTarget } from './target';
import { TargetRefusal } from './target-checks';
import { textChart } from './text-chart';

async function main(): Promise<number> {
  const parsed = parseOptions(process.argv.slice(2));
  // A deployment already running: no app of the bench's, one row (bench/target.ts).
  if (parsed.target) return benchTarget(parsed);
  const run = await prepare(parsed);
  const { options } = run;
  const rows: Row[] = [];
  // The comparison servers have no telemetry to switch off: they run once.
  // The comparison servers check no tokens either.
  const server = (target: RowSpec['target']): RowSpec => ({
    target,
    workers: 1,
    telemetry: true,
    settle: false,
    auth: 'off',
    queue: 0,
    catalog: 0,
    buckets: 1,
  });
  const specs: RowSpec[] = [
    ...(options.baseline ? [server('baseline')] : []),
    ...(options.soldOutPath ? (['raw-http', 'fastify-route'] as const).map(server) : []),
    ...options.strategies.flatMap((target) =>
      options.workers.flatMap((workers) =>
        options.telemetry.flatMap((telemetry) =>
          options.settle.flatMap((settle) =>
            options.auth.flatMap((auth) =>
              options.queue.flatMap((queue) =>
                catalogs(options).flatMap((catalog) =>
                  options.buckets.map((buckets): RowSpec => ({
                    target,
                    workers,
                    telemetry,
                    settle,
                    auth,
                    queue,
                    catalog,
                    buckets,
                  })),
                ),
              ),
            ),
          ),
        ),
      ),
    ),
  ];
  for (const spec of specs) rows.push(await runRow(run, spec));
  const compared = withRatios(rows);
  for (const line of queueComparisons(compared)) run.log(line);
  const { machine, html } = await writeResults(run, compared);
  const { text, failed } = formatReport(compared);
  process.stdout.write(`${text}\n`);
  run.log(`results: ${relative(process.cwd(), options.out)}, charts: ${relative(process.cwd(), html)}`);
  // Figures mean little without what ran them: the Node of the app and the bench alike.
  run.log(`ran on Node ${machine.node}, Redis ${machine.redis}, ${machine.cpus} × ${machine.cpuModel}`);
  // Last, so a terminal's final screen shows the sale itself: the stock line, and who crossed it.
  process.stdout.write(`\n${textChart(compared)}\n`);
  return failed ? 1 : 0;
}

/** One row: a fresh app for the target, warmed up, one measured sale (or up to three for the control), judged. */
async function runRow(run: Run, spec: RowSpec): Promise<Row> {
  const t = await startTarget(run, spec);
  try {
    // The catalog first: its idle products are there through the warm-up and the sale, as a shop's are.
    if (spec.catalog > 0) t.catalog = await listCatalog(run, t, spec.catalog);
    // The control is not measured for speed: it runs cold (see measuredSale).
    if (spec.target !== 'none') await warmUp(run, t);
    const measured = await measuredSale(run, t);
    const exitCode = await t.app.stop();
    // Its last lines say why (a hung close, a request cut at the deadline): a failure to read, not to guess.
    if (exitCode !== 0) {
      const said = t.app.tail().split('\n').slice(-3).join(' | ');
      measured.verdict.problems.push(`the app exited ${exitCode} on SIGTERM instead of 0 (its last lines: ${said})`);
    }
    return toRow(run, t, measured, exitCode);
  } finally {
    await t.app.stop();
    await cleanUp(run, t);
  }
}

/** Entry point (scripts/bench.js): runs main, stops everything it started, exits. */
export function cli(): void {
  runToExit(main, {
    onSignal: (signal) => process.stderr.write(`\n[bench] ${signal}: stopping everything the bench started\n`),
    quietAfterSignal: true,
    failed: (err) => {
      // One line, no usage: the command was right, the deployment it names is not.
      if (err instanceof TargetRefusal) {
        process.stderr.write(`[bench] refused: ${redactUrls(err.message)}\n`);
        return 2;
      }
      process.stderr.write(
        err instanceof UsageError ? `${err.message}\n\n${USAGE}` : `[bench] failed: ${err.stack ?? err.message}\n`,
      );
      return err instanceof UsageError ? 2 : 1;
    },
  });
}
