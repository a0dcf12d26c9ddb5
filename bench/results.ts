/**
 * What a bench run leaves: the JSON results and the HTML report beside them, each row
 * given its ratios to the comparison rows measured in the same run.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, relative } from 'node:path';
import { ROOT } from '../harness/paths';
import { chartJsSource, htmlReport, htmlPathFor } from './html-report';
import { redactArgv, redactOptions } from './redact';
import { Row, twin } from './report';
import { n, Run } from './rows';

/** The JSON results, and the HTML report beside them; the machine they ran on and the HTML's path. */
export async function writeResults(
  run: Run,
  rows: Row[],
): Promise<{ machine: { cpus: number; cpuModel: string; node: string; redis: string }; html: string }> {
  const { options } = run;
  const redisVersion = /redis_version:(\S+)/.exec(await run.meters[0].client.info('server'))?.[1] ?? 'unknown';
  const report = {
    // Results are shared and kept: a deployment's secrets are not written into them.
    command: `npm run bench -- ${redactArgv(process.argv.slice(2)).join(' ')}`.trim(),
    date: new Date().toISOString(),
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? 'unknown',
      node: process.version,
      redis: redisVersion,
    },
    options: { ...redactOptions(options), out: relative(ROOT, options.out) },
    rows,
  };
  mkdirSync(dirname(options.out), { recursive: true });
  writeFileSync(options.out, `${JSON.stringify(report, null, 2)}\n`);
  const html = htmlPathFor(options.out);
  writeFileSync(html, htmlReport(report, chartJsSource()));
  return { machine: report.machine, html };
}

/**
 * Each row's figures as multiples of the comparison servers' measured in the same run:
 * throughput and p99 of the baseline's, app CPU per request of the bare Fastify route's;
 * a telemetry-off row's throughput as a multiple of the same set-up's with telemetry on,
 * a settling row's of the one without settlement, a row with a catalog of the one
 * without (each its twin: every other row option the same).
 */
export function withRatios(rows: Row[]): Row[] {
  const ratio = (a: number, b: number) => Math.round((a / Math.max(b, 1)) * 100) / 100;
  const baseline = rows.find((r) => r.strategy === 'baseline');
  const routeCpu = rows.find((r) => r.strategy === 'fastify-route')?.cost.appCpuUsPerRequest;
  const telemetryOn = (row: Row) => twin(rows, row, { telemetry: true });
  const settleOff = (row: Row) => twin(rows, row, { settle: false });
  const noCatalog = (row: Row) => twin(rows, row, { catalog: 0 });
  return rows.map((row) => ({
    ...row,
    ...(row.catalog &&
      noCatalog(row) && { vsNoCatalog: { throughput: ratio(row.throughput, noCatalog(row)!.throughput) } }),
    ...(row.settle &&
      settleOff(row) && { vsSettleOff: { throughput: ratio(row.throughput, settleOff(row)!.throughput) } }),
    ...(!row.telemetry &&
      telemetryOn(row) && { vsTelemetryOn: { throughput: ratio(row.throughput, telemetryOn(row)!.throughput) } }),
    ...(baseline && {
      vsBaseline: {
        throughput: ratio(row.throughput, baseline.throughput),
        p99: ratio(row.latency.p99, baseline.latency.p99),
      },
    }),
    ...(routeCpu &&
      row.cost.appCpuUsPerRequest !== null && {
        vsFastifyRoute: { appCpuPerRequest: Math.round((row.cost.appCpuUsPerRequest / routeCpu) * 100) / 100 },
      }),
    ...(row.queue &&
      noQueueCpu(rows, row) !== null && {
        vsNoQueue: { appCpuPerRequest: ratio(row.cost.appCpuUsPerRequest!, noQueueCpu(rows, row)!) },
      }),
  }));
}

/** The same set-up's row without a waiting room, measured in this run. */
function withoutQueue(rows: readonly Row[], row: Row): Row | undefined {
  return twin(rows, row, { queue: 0 });
}

/** That row's app CPU per request, when both rows have one. */
function noQueueCpu(rows: readonly Row[], row: Row): number | null {
  if (row.cost.appCpuUsPerRequest === null) return null;
  return withoutQueue(rows, row)?.cost.appCpuUsPerRequest ?? null;
}

/** --queue off,RATE: what the waiting room saved (or cost) the app per request, row by row. */
export function queueComparisons(rows: readonly Row[]): string[] {
  return rows.flatMap((row) => {
    const without = row.queue && row.vsNoQueue ? withoutQueue(rows, row) : undefined;
    if (!without) return [];
    return [
      `${row.label}: app CPU per request ${row.vsNoQueue!.appCpuPerRequest}x the same sale's without a waiting room ` +
        `(${row.cost.appCpuUsPerRequest!.toFixed(1)} vs ${without.cost.appCpuUsPerRequest!.toFixed(1)} µs; ` +
        `${n(row.requests)} requests vs ${n(without.requests)})`,
    ];
  });
}
