/**
 * The history checker: a product's history (bench/history/history.ts) judged at every
 * instant, not at its end (docs/history.md). Jepsen judges a history, not a snapshot:
 * here the log says what Redis did and in which order, the requests say what each buyer
 * asked and was told and when, and the clock link puts both on Redis's time line.
 *
 * Redis stamps in whole milliseconds: an entry stamped `m` was written at some instant of
 * [m, m + 1) of Redis's clock. A request sent at `s` and answered at `b` (the load's
 * clock, historyNow(), read to a fraction of a millisecond; a millisecond of margin is
 * kept for a caller that reads whole ones) ran within [s, b + 1) of it, that is within
 * [s + offset - u, b + 1 + offset + u) of Redis's, u the link's uncertainty. A finding
 * is claimed only when it holds over the widest bounds, so no safe run fails for the
 * clocks' resolution; what the bounds cannot decide either way is counted as
 * undecided and listed, never counted as passed.
 */
import type { CheckName, CheckState, Finding, History, HistoryReport } from './history';
import { LogCheck } from './log-check';
import { falseRefusals, outsideWrites } from './request-checks';
import { checkTotalQueue } from './total-queue';

export { historyLine } from './history-line';
export { LogCheck } from './log-check';
export type { OrderState } from './log-check';
export { REFUSALS } from './request-checks';
export { checkTotalQueue } from './total-queue';

/** The whole history judged: every check the input allows. */
export function checkHistory(history: History): HistoryReport {
  const requests = history.requests;
  const log = new LogCheck(history.stock, history.perUserLimit, history.logComplete, requests !== undefined);
  for (const e of history.log) log.add(e);
  const findings: Finding[] = [];
  const checks: Partial<Record<CheckName, CheckState>> = {};
  const notProven: string[] = [];
  let refusals = 0;
  let undecided = 0;
  const acknowledged = requests && new Set(requests.flatMap((q) => (q.orderId ? [q.orderId] : [])));
  // Every acknowledged order is in the log (nothing a buyer was told is lost): no clock needed.
  for (const id of history.logComplete ? (acknowledged ?? []) : []) {
    if (!log.states.has(id)) {
      findings.push({
        check: 'ordersOnce',
        ms: null,
        orderIds: [id],
        detail: `order ${id} was acknowledged (201) but is not in the log`,
      });
    }
  }
  if (requests) {
    if (!history.clock) {
      checks.falseRefusals = checks.outsideWrites = 'not proven';
      notProven.push("no clock link: the requests' times cannot be put on Redis's time line");
    } else if (!history.logComplete) {
      checks.falseRefusals = checks.outsideWrites = 'not proven';
      notProven.push("the log was trimmed: the requests' checks need the whole log");
    } else if (log.malformed !== null) {
      checks.falseRefusals = checks.outsideWrites = 'not proven';
    } else {
      const r = falseRefusals(log.steps!, history.stock, requests, history.clock);
      refusals = r.refusals;
      undecided = r.undecided;
      findings.push(...r.findings);
      findings.push(...outsideWrites(history.log, requests, history.clock));
      checks.falseRefusals = checks.outsideWrites = 'pass';
    }
  }
  if (history.settled && !history.logComplete) {
    // PostgreSQL holds what was trimmed: against a partial log every such order would look lost.
    checks.totalQueue = 'not proven';
  } else if (history.settled) {
    findings.push(...checkTotalQueue(log.states, history.settled, acknowledged));
    checks.totalQueue = 'pass';
  }
  return log.report(history.productId, {
    findings,
    checks,
    notProven,
    ...(history.clock && { clock: history.clock }),
    refusals,
    undecided,
  });
}
