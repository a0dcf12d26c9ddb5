/**
 * A product's sale as a history (Jepsen's view: operations and what the store did
 * between them), the input of the checker (bench/history/check.ts). Two halves on one
 * time line: the order log, in Redis's order and stamped by Redis's clock (each stream
 * entry's id), and, where a load generator saw the sale, every request it sent: when,
 * when it was answered, and what it was told. This folder depends on nothing in src/.
 */

/** What a stream entry records: an order written, or what became of one (order-outcome-6.lua). */
export type LogKind = 'order' | 'paid' | 'cancelled' | 'expired';

/** One entry of a product's order stream. */
export interface LogEntry {
  /** The stream id, `<ms>-<seq>`: Redis's order. */
  readonly id: string;
  /** Redis's clock at the write, ms (the id's first part). */
  readonly ms: number;
  readonly kind: LogKind;
  readonly orderId: string;
  readonly userId: string;
  readonly quantity: number;
}

/** One purchase request, as the load generator saw it (its own clock: historyNow(), bench/history/clock.ts). */
export interface RequestRecord {
  readonly userId: string;
  /** The product bought, when a load spreads its buyers over several. */
  readonly productId?: string;
  /** Units asked for. */
  readonly quantity: number;
  /** Handed to its socket. */
  readonly sentAt: number;
  /** Its answer arrived; null when none did (a socket error, a timeout, the app killed): its outcome is unknown. */
  readonly answeredAt: number | null;
  /** HTTP status, null when unanswered. */
  readonly status: number | null;
  /** CREATED for a 201, else the error body's `code` (HTTP_<status> without one); null when unanswered. */
  readonly code: string | null;
  /** The order a 201 acknowledged. */
  readonly orderId?: string;
}

/**
 * Redis's clock less the load generator's, and how far that can be wrong: half the
 * round trip of the TIME that measured it (and half a millisecond), and half how far it
 * moved between a reading at the start and one at the end (bench/history/clock.ts).
 */
export interface ClockLink {
  readonly offsetMs: number;
  readonly uncertaintyMs: number;
}

/** An order as PostgreSQL, the system of record, holds it (the settler's `orders` row). */
export interface SettledOrder {
  readonly orderId: string;
  readonly userId: string;
  readonly quantity: number;
  readonly status: 'reserved' | 'paid' | 'cancelled' | 'expired';
  /** created_at: Redis's clock at the order's entry, ms. */
  readonly createdMs: number;
}

export interface History {
  readonly productId: string;
  /** The sale's initial stock. */
  readonly stock: number;
  readonly perUserLimit: number;
  /** The order stream, in Redis's order. */
  readonly log: readonly LogEntry[];
  /**
   * False when the stream's head was trimmed (SETTLE_TRIM): what came before the first
   * entry is not in the log, so the checks that need the whole log say "not proven".
   */
  readonly logComplete: boolean;
  /** Every request of the sale for this product; absent when no client's view is known (`npm run audit`). */
  readonly requests?: readonly RequestRecord[];
  /** Required with `requests`: how the load's clock maps onto Redis's. */
  readonly clock?: ClockLink;
  /** PostgreSQL's orders of the product, once settlement drained; absent when not settled or not checked. */
  readonly settled?: readonly SettledOrder[];
}

/**
 * The checks: units held never above the stock; no refusal false over its whole window;
 * no write outside its request; the per-user limit at every instant; each return (and
 * payment) once, after its order; each order written once and every acknowledged one in
 * the log; PostgreSQL as a total queue.
 */
export const CHECKS = [
  'oversell',
  'falseRefusals',
  'outsideWrites',
  'perUserLimit',
  'returns',
  'ordersOnce',
  'totalQueue',
] as const;
export type CheckName = (typeof CHECKS)[number];

/** pass: proven to hold; fail: a finding; not proven: could not be decided (it never passes); not run: no input for it. */
export type CheckState = 'pass' | 'fail' | 'not proven' | 'not run';

/** One thing found wrong, with when (Redis's clock) and which orders. */
export interface Finding {
  readonly check: CheckName;
  /** Redis's clock, ms; null when no instant applies (an order missing from PostgreSQL). */
  readonly ms: number | null;
  readonly orderIds: readonly string[];
  readonly userId?: string;
  /** One line saying what was seen. */
  readonly detail: string;
}

export interface HistoryReport {
  readonly productId: string;
  readonly stock: number;
  readonly checks: Record<CheckName, CheckState>;
  /** Every check that ran passed (a check not proven does not hold). */
  readonly holds: boolean;
  /** The most units held at any instant of the log, and when it was first reached (Redis's clock, ms). */
  readonly peak: { readonly units: number; readonly ms: number | null };
  /** Held above the stock: how far at most, and from when to when; null when never. */
  readonly oversell: {
    readonly units: number;
    readonly firstMs: number;
    readonly lastMs: number;
    /** Entries of the log after which more was held than the stock. */
    readonly entries: number;
  } | null;
  /** Findings per check, every one counted. */
  readonly counts: Record<CheckName, number>;
  /** The first findings of each check (a few per check, enough to name them). */
  readonly findings: readonly Finding[];
  /** Why a check could not be decided, one line each. */
  readonly notProven: readonly string[];
  readonly clock?: ClockLink;
  /** The log's size: order entries, returns (cancelled + expired), payments. */
  readonly orders: number;
  readonly returns: number;
  readonly paid: number;
  /** Refusals (SOLD_OUT, INSUFFICIENT_STOCK) judged, when requests were given. */
  readonly refusals: number;
  /**
   * Refusals neither proven false nor proven right: their window meets a change of the
   * units held within the clocks' resolution (a millisecond each side, and the link's
   * uncertainty). Listed, never counted as passed, and not a failure.
   */
  readonly undecided: number;
}
