import type { CheckName, HistoryReport } from './history';
import { CHECKS } from './history';

const plural = (n: number, one: string, many = `${one}s`) => `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;

/** Ms after `originMs` (Redis's clock), as `+123 ms`; the absolute stamp without an origin. */
function at(ms: number | null, originMs?: number): string {
  if (ms === null) return 'never';
  return originMs === undefined ? `at ${ms}` : `at +${Math.max(0, ms - originMs).toLocaleString('en-US')} ms`;
}

/**
 * One line for a report: the peak, and each check's state and count. `originMs` (Redis's
 * clock, e.g. the load's start) makes the times relative to it.
 */
export function historyLine(report: HistoryReport, originMs?: number): string {
  const n = (v: number) => v.toLocaleString('en-US');
  const { counts, checks } = report;
  const parts: string[] = [];
  parts.push(`peak ${n(report.peak.units)} of ${n(report.stock)} held ${at(report.peak.ms, originMs)}`);
  if (report.oversell) {
    parts[0] += ` (oversold by ${n(report.oversell.units)}, ${at(report.oversell.firstMs, originMs)} to ${at(report.oversell.lastMs, originMs).replace(/^at /, '')})`;
  }
  const state = (c: CheckName, one: string, many: string) => {
    if (checks[c] === 'not run') return null;
    if (checks[c] === 'not proven') return `${many}: not proven`;
    return plural(counts[c], one, many);
  };
  const refused = state('falseRefusals', 'false refusal', 'false refusals');
  if (refused) {
    parts.push(
      `${refused} of ${plural(report.refusals, 'refusal')}` +
        (report.undecided > 0 ? ` (${n(report.undecided)} undecided within the clocks' resolution)` : ''),
    );
  }
  parts.push(
    ...[
      state('outsideWrites', 'write outside its request', 'writes outside their request'),
      state('perUserLimit', 'over the per-user limit', 'over the per-user limit'),
      state('ordersOnce', 'order not written once', 'orders not written once'),
      checks.returns === 'pass' && counts.returns === 0
        ? `${plural(report.returns, 'return')} once each`
        : state('returns', 'bad return', 'bad returns'),
      state('totalQueue', 'PostgreSQL mismatch', 'PostgreSQL mismatches'),
    ].filter((p): p is string => p !== null),
  );
  const failed = CHECKS.filter((c) => checks[c] === 'fail');
  const unproven = CHECKS.filter((c) => checks[c] === 'not proven');
  const verdict = report.holds
    ? 'holds'
    : failed.length > 0
      ? `FAILS ${failed.join(', ')}`
      : `not proven (${unproven.join(', ')})`;
  const clock = report.clock ? `; clocks linked ±${report.clock.uncertaintyMs.toFixed(1)} ms` : '';
  return `history ${verdict}: ${parts.join('; ')}${clock}`;
}
