/**
 * The history checker: a product's history (bench/history/history.ts) judged at every
 * instant, not at its end.
 */
import type { CheckName, Finding, History, HistoryReport, LogEntry, SettledOrder } from './history';

/** Codes that say "not enough units": false when units were free during the whole request. */
export const REFUSALS: readonly string[] = ['SOLD_OUT', 'INSUFFICIENT_STOCK'];

/** What the log says became of an order (its last state). */
export interface OrderState {
  readonly status: 'reserved' | 'paid' | 'cancelled' | 'expired';
  readonly userId: string;
  readonly quantity: number;
  /** Its order entry's time, Redis's clock. */
  readonly ms: number;
}

/**
 * The checks that need the log alone (oversell at every instant, per-user limit at every
 * instant, each return once and after its order), fed one entry at a time in stream
 * order, so a reader can page through a stream of any length (`npm run audit`).
 */
export class LogCheck {
  constructor(
    readonly stock: number,
    readonly perUserLimit: number,
  ) {
    throw new Error('not yet');
  }
  add(_entry: LogEntry): void {}
  /** Each order's last state, by orderId. */
  get states(): ReadonlyMap<string, OrderState> {
    return new Map();
  }
}

/** The whole history judged: every check the input allows. */
export function checkHistory(_history: History): HistoryReport {
  throw new Error('not yet');
}

/**
 * PostgreSQL as a total queue (Jepsen's total-queue): every order the log has (and every
 * acknowledged one) there once with its final status; none there that the log lacks.
 */
export function checkTotalQueue(
  _states: ReadonlyMap<string, OrderState>,
  _settled: Iterable<SettledOrder>,
  _acknowledged?: ReadonlySet<string>,
): Finding[] {
  throw new Error('not yet');
}

/** One line for a report: the peak, and each check's state and count. */
export function historyLine(_report: HistoryReport): string {
  throw new Error('not yet');
}

export type { CheckName };
