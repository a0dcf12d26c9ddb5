/**
 * The history checker: a product's history (bench/history/history.ts) judged at every
 * instant, not at its end (docs/history.md). Jepsen judges a history, not a snapshot:
 * here the log says what Redis did and in which order, the requests say what each buyer
 * asked and was told and when, and the clock link puts both on Redis's time line.
 *
 * Time is whole milliseconds on both sides: an entry stamped `m` was written at some
 * instant of [m, m + 1) of Redis's clock; a request sent at `s` and answered at `b` (the
 * load's clock) ran within [s, b + 1) of it, that is within
 * [s + offset - u, b + 1 + offset + u) of Redis's, u the link's uncertainty. A finding
 * is claimed only when it holds over the widest bounds, so no safe run fails for the
 * clocks' resolution; what the bounds cannot decide either way is counted as
 * undecided and listed, never counted as passed.
 */
import type {
  CheckName,
  CheckState,
  ClockLink,
  Finding,
  History,
  HistoryReport,
  LogEntry,
  RequestRecord,
  SettledOrder,
} from './history';
import { CHECKS } from './history';

/** Codes that say "not enough units": false when units were free during the whole request. */
export const REFUSALS: readonly string[] = ['SOLD_OUT', 'INSUFFICIENT_STOCK'];

/** Answers after which a write may still land: it was acknowledged, or the app said it cannot tell. */
const MAY_WRITE_AFTER: readonly string[] = ['CREATED', 'OUTCOME_UNKNOWN'];

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
interface Step {
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

const plural = (n: number, one: string, many = `${one}s`) => `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;

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
    const byLog = (c: CheckName): CheckState => {
      if (found.counts[c] > 0) return 'fail';
      return this.complete ? 'pass' : 'not proven';
    };
    if (!this.complete) {
      notProven.push(
        'the log was trimmed (SETTLE_TRIM): the units held before its first entry are unknown, so the peak and the per-user counts are not proven',
      );
    }
    const checks: Record<CheckName, CheckState> = {
      oversell: byLog('oversell'),
      falseRefusals: 'not run',
      outsideWrites: 'not run',
      perUserLimit: byLog('perUserLimit'),
      returns: found.counts.returns > 0 ? 'fail' : 'pass',
      ordersOnce: found.counts.ordersOnce > 0 ? 'fail' : 'pass',
      totalQueue: 'not run',
    };
    for (const [c, state] of Object.entries(more.checks ?? {}) as [CheckName, CheckState][]) {
      checks[c] = found.counts[c] > 0 ? 'fail' : state;
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
  if (requests) {
    if (!history.clock) {
      checks.falseRefusals = checks.outsideWrites = 'not proven';
      notProven.push("no clock link: the requests' times cannot be put on Redis's time line");
    } else if (!history.logComplete) {
      checks.falseRefusals = checks.outsideWrites = 'not proven';
      notProven.push("the log was trimmed: the requests' checks need the whole log");
    } else {
      const r = falseRefusals(log.steps!, history.stock, requests, history.clock);
      refusals = r.refusals;
      undecided = r.undecided;
      findings.push(...r.findings);
      findings.push(...outsideWrites(history.log, requests, history.clock));
      checks.falseRefusals = checks.outsideWrites = 'pass';
      // Every acknowledged order is in the log (nothing a buyer was told is lost).
      for (const id of new Set(requests.flatMap((q) => (q.orderId ? [q.orderId] : [])))) {
        if (!log.states.has(id)) {
          findings.push({
            check: 'ordersOnce',
            ms: null,
            orderIds: [id],
            detail: `order ${id} was acknowledged (201) but is not in the log`,
          });
        }
      }
    }
  }
  if (history.settled) {
    const acknowledged = requests && new Set(requests.flatMap((q) => (q.orderId ? [q.orderId] : [])));
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

/** A request's window on Redis's clock: surely within [lo, hi), and surely covering [innerLo, innerHi]. */
function windowOf(q: RequestRecord, clock: ClockLink) {
  const u = clock.uncertaintyMs;
  const answered = q.answeredAt ?? Infinity;
  return {
    lo: q.sentAt + clock.offsetMs - u,
    hi: answered + 1 + clock.offsetMs + u,
    innerLo: q.sentAt + 1 + clock.offsetMs + u,
    innerHi: answered + clock.offsetMs - u,
  };
}

/**
 * False refusals: a SOLD_OUT / INSUFFICIENT_STOCK whose whole window had enough units
 * free by the log. The states that may have held at some instant of [lo, hi) are the
 * steps written before hi whose successor was not surely written before lo: if even
 * the most held among them left `quantity` free, no instant made the refusal true.
 * A refusal that was true at a state surely inside its window is proven right; one
 * between the two (within the clocks' resolution) is undecided.
 */
function falseRefusals(steps: readonly Step[], stock: number, requests: readonly RequestRecord[], clock: ClockLink) {
  // State i holds from entry i's write, in [ms_i, ms_i + 1), to entry i + 1's; state 0 is the sale's start.
  const all: Step[] = [{ ms: -Infinity, held: 0 }, ...steps];
  const maxHeld = new RangeMax(all.map((s) => s.held));
  const firstAtLeast = (t: number) => lowerBound(all, (s) => s.ms >= t);
  const firstAbove = (t: number) => lowerBound(all, (s) => s.ms > t);
  const findings: Finding[] = [];
  let refusals = 0;
  let undecided = 0;
  for (const q of requests) {
    if (q.code === null || !REFUSALS.includes(q.code)) continue;
    refusals++;
    const w = windowOf(q, clock);
    // May have held in [lo, hi): began before hi (ms_i < hi) and ended after lo (ms_i+1 + 1 > lo).
    const mostHeld = maxHeld.max(firstAbove(w.lo - 1) - 1, firstAtLeast(w.hi) - 1);
    if (stock - mostHeld >= q.quantity) {
      findings.push({
        check: 'falseRefusals',
        ms: Math.round(w.lo),
        orderIds: [],
        userId: q.userId,
        detail:
          `${q.userId} was refused ${q.code} for ${q.quantity} while at most ${mostHeld} of ${stock} units were held ` +
          `during its whole request (sent ${q.sentAt}, answered ${q.answeredAt}, load's clock)`,
      });
      continue;
    }
    // Right for sure when a state with too few units free surely held at some instant of the
    // true window [S, A] (S <= innerLo, A >= max(lo, innerHi)): it surely began before A
    // (ms_i + 1 <= max(lo, innerHi)) and surely ended after S (ms_i+1 > innerLo).
    const surely = maxHeld.max(firstAbove(w.innerLo) - 1, firstAbove(Math.max(w.lo, w.innerHi) - 1) - 1);
    if (stock - surely >= q.quantity) undecided++;
  }
  return { findings, refusals, undecided };
}

/**
 * Writes outside their request: each order entry must fall within the window of a
 * request of its buyer that could have written it: one answered 201 with its id, one
 * whose outcome is unknown (no answer, OUTCOME_UNKNOWN: open to the end), or any other
 * of the buyer's requests while it was still in flight. After every one of them was
 * answered otherwise it is a late write (a paused holder's); before any was sent, an
 * early one.
 */
function outsideWrites(log: readonly LogEntry[], requests: readonly RequestRecord[], clock: ClockLink): Finding[] {
  const byUser = new Map<string, RequestRecord[]>();
  for (const q of requests) {
    const list = byUser.get(q.userId);
    if (list) list.push(q);
    else byUser.set(q.userId, [q]);
  }
  const findings: Finding[] = [];
  for (const e of log) {
    if (e.kind !== 'order') continue;
    const mine = byUser.get(e.userId) ?? [];
    const could = mine.filter((q) => {
      if (q.orderId !== undefined && q.orderId !== e.orderId) return false;
      const w = windowOf(q, clock);
      const openEnded = q.code === null || MAY_WRITE_AFTER.includes(q.code);
      // Written within [e.ms, e.ms + 1): possibly inside [lo, hi) when they overlap.
      return e.ms + 1 > w.lo && (openEnded || e.ms < w.hi);
    });
    if (could.length > 0) continue;
    const sentBefore = mine.filter((q) => q.sentAt + clock.offsetMs - clock.uncertaintyMs < e.ms + 1);
    const last = sentBefore.sort((a, b) => (a.answeredAt ?? Infinity) - (b.answeredAt ?? Infinity)).at(-1);
    findings.push({
      check: 'outsideWrites',
      ms: e.ms,
      orderIds: [e.orderId],
      userId: e.userId,
      detail: last
        ? `order ${e.orderId} of ${e.userId} written at ${e.id}, ${Math.round(e.ms - (last.answeredAt! + clock.offsetMs))} ms after its request was answered ${last.code}`
        : mine.length > 0
          ? `order ${e.orderId} of ${e.userId} written at ${e.id}, before its request was sent`
          : `order ${e.orderId} of ${e.userId} written at ${e.id}, and no request of ${e.userId} was sent`,
    });
  }
  return findings;
}

const STATUS_OF: Readonly<Record<string, OrderState['status']>> = {
  reserved: 'reserved',
  paid: 'paid',
  cancelled: 'cancelled',
  expired: 'expired',
};

/**
 * PostgreSQL as a total queue (Jepsen's total-queue): every order the log has (and every
 * acknowledged one) there once with its final status; none there that the log lacks.
 * An order PostgreSQL has and Redis's log does not is one a failover lost after it was
 * settled: its unit went back to Redis's stock and was sold again.
 */
export function checkTotalQueue(
  states: ReadonlyMap<string, OrderState>,
  settled: Iterable<SettledOrder>,
  acknowledged?: ReadonlySet<string>,
): Finding[] {
  const findings: Finding[] = [];
  const seen = new Set<string>();
  for (const row of settled) {
    if (seen.has(row.orderId)) {
      findings.push({
        check: 'totalQueue',
        ms: row.createdMs,
        orderIds: [row.orderId],
        userId: row.userId,
        detail: `order ${row.orderId} is in PostgreSQL twice`,
      });
      continue;
    }
    seen.add(row.orderId);
    const state = states.get(row.orderId);
    if (!state) {
      findings.push({
        check: 'totalQueue',
        ms: row.createdMs,
        orderIds: [row.orderId],
        userId: row.userId,
        detail: `order ${row.orderId} of ${row.userId} (${row.status}) is in PostgreSQL but not in Redis's log: ${
          acknowledged?.has(row.orderId) ? 'acknowledged, then lost by Redis' : 'lost by Redis, or never acknowledged'
        } (its ${row.quantity} units were back in Redis's stock)`,
      });
      continue;
    }
    if (STATUS_OF[row.status] !== state.status || row.userId !== state.userId || row.quantity !== state.quantity) {
      findings.push({
        check: 'totalQueue',
        ms: row.createdMs,
        orderIds: [row.orderId],
        userId: row.userId,
        detail: `order ${row.orderId}: PostgreSQL has ${row.status} ${row.quantity} of ${row.userId}, Redis's log ${state.status} ${state.quantity} of ${state.userId}`,
      });
    }
  }
  for (const [id, state] of states) {
    if (seen.has(id)) continue;
    findings.push({
      check: 'totalQueue',
      ms: state.ms,
      orderIds: [id],
      userId: state.userId,
      detail: `order ${id} of ${state.userId} (${state.status}) is in Redis's log but not in PostgreSQL`,
    });
  }
  for (const id of acknowledged ?? []) {
    if (seen.has(id) || states.has(id)) continue;
    findings.push({
      check: 'totalQueue',
      ms: null,
      orderIds: [id],
      detail: `order ${id} was acknowledged (201) but is neither in Redis's log nor in PostgreSQL`,
    });
  }
  return findings;
}

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

/** The first index at which `pred` turns true (pred false then true along `items`); items.length if never. */
function lowerBound<T>(items: readonly T[], pred: (item: T) => boolean): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (pred(items[mid])) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** Range maximum in O(1) after O(n log n) (a sparse table): one query per refusal, 100k of them. */
class RangeMax {
  private readonly table: Float64Array[];

  constructor(values: readonly number[]) {
    this.table = [Float64Array.from(values)];
    for (let k = 1; 1 << k <= values.length; k++) {
      const prev = this.table[k - 1];
      const row = new Float64Array(values.length - (1 << k) + 1);
      for (let i = 0; i < row.length; i++) row[i] = Math.max(prev[i], prev[i + (1 << (k - 1))]);
      this.table.push(row);
    }
  }

  /** Max of values[from..to], both included; -Infinity for an empty range. */
  max(from: number, to: number): number {
    if (to < from) return -Infinity;
    const k = 31 - Math.clz32(to - from + 1);
    return Math.max(this.table[k][from], this.table[k][to - (1 << k) + 1]);
  }
}
