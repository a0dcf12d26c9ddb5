/**
 * The checks of the requests against the log (bench/history/check.ts): false refusals
 * and writes outside their request, each window on Redis's clock, bounded as the
 * checker's header says.
 */
import type { ClockLink, Finding, LogEntry, RequestRecord } from './history';
import type { Step } from './log-check';

/** Codes that say "not enough units": false when units were free during the whole request. */
export const REFUSALS: readonly string[] = ['SOLD_OUT', 'INSUFFICIENT_STOCK'];

/** Answers after which a write may still land: it was acknowledged, or the app said it cannot tell. */
const MAY_WRITE_AFTER: readonly string[] = ['CREATED', 'OUTCOME_UNKNOWN'];

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
export function falseRefusals(
  steps: readonly Step[],
  stock: number,
  requests: readonly RequestRecord[],
  clock: ClockLink,
) {
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
          `during its whole request (sent ${Math.round(q.sentAt + clock.offsetMs)}, answered ${q.answeredAt === null ? '-' : Math.round(q.answeredAt + clock.offsetMs)}, Redis's clock)`,
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
export function outsideWrites(
  log: readonly LogEntry[],
  requests: readonly RequestRecord[],
  clock: ClockLink,
): Finding[] {
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
