import { historyLine } from '../../bench/history/check';
import { CHECKS, CheckName, CheckState, Finding, HistoryReport } from '../../bench/history/history';
import type { HistoryVerdict } from '../../bench/verdict';

/** What the history checker says of a product whose every check passed, unless `fields` says otherwise. */
export function historyReport(fields: Partial<HistoryReport> = {}): HistoryReport {
  const each = <T>(value: T) => Object.fromEntries(CHECKS.map((c) => [c, value])) as Record<CheckName, T>;
  return {
    productId: 'hot',
    stock: 3,
    checks: each<CheckState>('pass'),
    holds: true,
    peak: { units: 3, ms: null },
    oversell: null,
    counts: each(0),
    findings: [],
    notProven: [],
    orders: 3,
    returns: 0,
    paid: 0,
    refusals: 7,
    undecided: 0,
    ...fields,
  };
}

/**
 * A report whose `check` failed with these findings (`counts` says `count`, default
 * their number), and with `peak` units held of `stock` at `peakMs`: an oversell when above.
 */
export function failedReport(
  stock: number,
  peak: { units: number; ms: number },
  check: CheckName,
  findings: readonly Omit<Finding, 'check'>[],
  count = findings.length,
): HistoryReport {
  const base = historyReport();
  return historyReport({
    stock,
    checks: { ...base.checks, [check]: 'fail' },
    holds: false,
    peak,
    oversell:
      peak.units > stock
        ? { units: peak.units - stock, firstMs: peak.ms, lastMs: peak.ms, entries: peak.units - stock }
        : null,
    counts: { ...base.counts, [check]: count },
    findings: findings.map((f) => ({ ...f, check })),
  });
}

/** A report as a bench verdict carries it (bench/verdict.ts withHistory): its time axis from `startMs`, and its line. */
export function historyVerdict(
  report: HistoryReport,
  startMs: number,
  fields: Partial<HistoryReport> = {},
): HistoryVerdict {
  const whole = { ...report, ...fields };
  return { ...whole, startMs, line: historyLine(whole, startMs) };
}
