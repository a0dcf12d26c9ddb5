/**
 * The checks of the log alone (bench/history/check.ts): units held never above the
 * stock, the per-user limit at every instant, each order written once, each return
 * once and after its order, fed one entry at a time.
 */
import type { CheckName, CheckState, ClockLink, Finding, HistoryReport, LogEntry } from './history';
import { CHECKS } from './history';

/** Findings kept per check to name them; every one is counted. */
const KEPT = 5;

/** What the log says became of an order (its last state). */
export interface OrderState {
  readonly status: 'reserved' | 'paid' | 'cancelled' | 'expired';
  readonly userId: string;
  readonly quantity: number;
  /** Its order entry's time, Redis's clock. */
  readonly ms: number;
}

/** Units held after one entry of the log. */
export interface Step {
  readonly ms: number;
  readonly held: number;
}

/** Findings of each check: all counted, the first few kept. */
class Findings {
  readonly counts = Object.fromEntries(CHECKS.map((c) => [c, 0])) as Record<CheckName, number>;
  readonly kept: Finding[] = [];

  add(finding: Finding): void {
    if (this.counts[finding.check]++ < KEPT) this.kept.push(finding);
  }
}

/**
 * The checks that need the log alone (units held never above the stock, the per-user
 * limit at every instant, each order written once, each return once and after its
 * order), fed one entry at a time in stream order, so a reader can page through a
 * stream of any length (`npm run audit`). Memory: one small record per order.
 */
export class LogCheck {
  private held = 0;
  private peakUnits = 0;
  private peakMs: number | null = null;
  /** Held above the stock: how far at most, when, how often, and the entries that first crossed and went furthest. */
  private over: {
    units: number;
    firstMs: number;
    lastMs: number;
    entries: number;
    first: LogEntry;
    worst: LogEntry;
  } | null = null;
  private readonly perUser = new Map<string, number>();
  private readonly orderStates = new Map<string, OrderState>();
  private readonly found = new Findings();
  private orders = 0;
  private returns = 0;
  private paid = 0;
  /** Why the log cannot be judged (out of order, a quantity that is no whole unit), or null. */
  malformed: string | null = null;
  private lastMs = -Infinity;
  /** Units held after each entry, for the checks against the requests (kept only when asked). */
  readonly steps: Step[] | null;

  /**
   * `complete` false: the log's head was trimmed, so the units held before its first
   * entry are not known: the per-instant checks cannot be decided, and a return of an
   * order the log does not show may be of one written before the trim.
   */
  constructor(
    readonly stock: number,
    readonly perUserLimit: number,
    readonly complete = true,
    keepSteps = false,
  ) {
    this.steps = keepSteps ? [] : null;
  }

  add(e: LogEntry): void {
    // A stream's ids only grow and its quantities are whole units: anything else is not
    // a log this checker can judge (a hand-merged one, a damaged entry), whatever it says.
    if (!(Number.isInteger(e.quantity) && e.quantity > 0))
      this.malformed ??= `entry ${e.id} has quantity ${e.quantity}`;
    if (e.ms < this.lastMs) this.malformed ??= `entry ${e.id} is stamped before the entry before it`;
    this.lastMs = Math.max(this.lastMs, e.ms);
    if (e.kind === 'order') this.order(e);
    else if (e.kind === 'paid') this.payment(e);
    else this.giveBack(e);
    this.steps?.push({ ms: e.ms, held: this.held });
  }

  /** Each order's last state, by orderId. */
  get states(): ReadonlyMap<string, OrderState> {
    return this.orderStates;
  }

  private order(e: LogEntry): void {
    this.orders++;
    // A second entry of one order id is a write applied twice: its units were taken twice.
    if (this.orderStates.has(e.orderId)) {
      this.found.add({
        check: 'ordersOnce',
        ms: e.ms,
        orderIds: [e.orderId],
        userId: e.userId,
        detail: `order ${e.orderId} written again at ${e.id}`,
      });
    }
    this.orderStates.set(e.orderId, { status: 'reserved', userId: e.userId, quantity: e.quantity, ms: e.ms });
    this.hold(e, e.userId, e.quantity);
    const units = this.perUser.get(e.userId)!;
    if (units > this.perUserLimit) {
      this.found.add({
        check: 'perUserLimit',
        ms: e.ms,
        orderIds: [e.orderId],
        userId: e.userId,
        detail: `${e.userId} held ${units} units after order ${e.orderId} (${e.id}), above the limit of ${this.perUserLimit}`,
      });
    }
    if (this.held > this.stock) {
      this.over ??= { units: 0, firstMs: e.ms, lastMs: e.ms, entries: 0, first: e, worst: e };
      this.over.entries++;
      this.over.lastMs = e.ms;
      if (this.held - this.stock > this.over.units) {
        this.over.units = this.held - this.stock;
        this.over.worst = e;
      }
    }
  }

  private payment(e: LogEntry): void {
    this.paid++;
    const state = this.orderStates.get(e.orderId);
    if (!state && !this.complete) return;
    if (!state || state.status !== 'reserved') {
      this.found.add({
        check: 'returns',
        ms: e.ms,
        orderIds: [e.orderId],
        userId: e.userId,
        detail: `order ${e.orderId} paid at ${e.id} ${state ? `after it was ${state.status}` : 'but never written'}`,
      });
      return;
    }
    this.orderStates.set(e.orderId, { ...state, status: 'paid' });
  }

  private giveBack(e: LogEntry): void {
    this.returns++;
    const state = this.orderStates.get(e.orderId);
    if (!state && !this.complete) {
      // An order from before the trim: its units left the (unknown) count then.
      this.held -= e.quantity;
      return;
    }
    if (!state || state.status !== 'reserved' || state.quantity !== e.quantity || state.userId !== e.userId) {
      const why = !state
        ? 'but was never written'
        : state.status !== 'reserved'
          ? `after it was ${state.status}`
          : `for ${e.quantity} units of ${e.userId}, not its ${state.quantity} of ${state.userId}`;
      this.found.add({
        check: 'returns',
        ms: e.ms,
        orderIds: [e.orderId],
        userId: e.userId,
        detail: `order ${e.orderId} ${e.kind} at ${e.id} ${why}`,
      });
      // Counted as the log says: a unit returned twice leaves the count twice, as it left the stock twice.
    }
    if (state?.status === 'reserved') this.orderStates.set(e.orderId, { ...state, status: e.kind as 'cancelled' });
    this.hold(e, e.userId, -e.quantity);
  }

  private hold(e: LogEntry, userId: string, units: number): void {
    this.held += units;
    const mine = (this.perUser.get(userId) ?? 0) + units;
    if (mine === 0) this.perUser.delete(userId);
    else this.perUser.set(userId, mine);
    if (this.held > this.peakUnits) {
      this.peakUnits = this.held;
      this.peakMs = e.ms;
    }
  }

  /**
   * The log's checks as a report; `more` adds what others decided (the requests' checks,
   * PostgreSQL's): their findings, their states, and why they could not be decided.
   */
  report(
    productId: string,
    more: {
      readonly findings?: readonly Finding[];
      readonly checks?: Partial<Record<CheckName, CheckState>>;
      readonly notProven?: readonly string[];
      readonly clock?: ClockLink;
      readonly refusals?: number;
      readonly undecided?: number;
    } = {},
  ): HistoryReport {
    const found = new Findings();
    for (const f of this.found.kept) found.kept.push(f);
    for (const c of CHECKS) found.counts[c] = this.found.counts[c];
    if (this.over) {
      // Every entry held above the stock counts; the first to cross and the furthest are named.
      const { first, worst, entries, units } = this.over;
      const named = first === worst ? [first] : [first, worst];
      for (const e of named) {
        found.kept.push({
          check: 'oversell',
          ms: e.ms,
          orderIds: [e.orderId],
          userId: e.userId,
          detail: `${e === first ? 'first above the stock' : `the peak, ${this.stock + units} held`}: order ${e.orderId} at ${e.id}`,
        });
      }
      found.counts.oversell = entries;
    }
    for (const f of more.findings ?? []) found.add(f);
    const notProven = [...(more.notProven ?? [])];
    // A finding stands; a pass needs the whole log, in order.
    const whole = this.complete && this.malformed === null;
    const byLog = (c: CheckName, state: CheckState = 'pass'): CheckState => {
      // What a log that is no stream's seems to show proves nothing, either way.
      if (this.malformed !== null && state !== 'not run') return 'not proven';
      if (found.counts[c] > 0) return 'fail';
      return state === 'pass' && !whole ? 'not proven' : state;
    };
    if (!this.complete) {
      notProven.push(
        'the log was trimmed (SETTLE_TRIM): what came before its first entry is unknown, so the peak, the per-user counts, each order once and each return once are not proven',
      );
    }
    if (this.malformed) notProven.push(`the log cannot be judged: ${this.malformed}`);
    const checks: Record<CheckName, CheckState> = {
      oversell: byLog('oversell'),
      falseRefusals: 'not run',
      outsideWrites: 'not run',
      perUserLimit: byLog('perUserLimit'),
      returns: byLog('returns'),
      ordersOnce: byLog('ordersOnce'),
      totalQueue: 'not run',
    };
    for (const [c, state] of Object.entries(more.checks ?? {}) as [CheckName, CheckState][]) {
      checks[c] = byLog(c, state);
    }
    return {
      productId,
      stock: this.stock,
      checks,
      holds: CHECKS.every((c) => checks[c] === 'pass' || checks[c] === 'not run'),
      peak: { units: this.peakUnits, ms: this.peakMs },
      oversell: this.over && {
        units: this.over.units,
        firstMs: this.over.firstMs,
        lastMs: this.over.lastMs,
        entries: this.over.entries,
      },
      counts: found.counts,
      findings: found.kept,
      notProven,
      ...(more.clock && { clock: more.clock }),
      orders: this.orders,
      returns: this.returns,
      paid: this.paid,
      refusals: more.refusals ?? 0,
      undecided: more.undecided ?? 0,
    };
  }
}
