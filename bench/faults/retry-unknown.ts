/**
 * The retries of the buyers told OUTCOME_UNKNOWN: each asks once more with its key and
 * body at the app that answered it, and what it finds is judged against the sale read
 * before the retries.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { request } from '../../harness/http';
import { historyNow } from '../history/clock';
import type { RequestRecord } from '../history/history';
import type { Answer } from '../load';
import type { SaleSnapshot } from '../verdict';
import { PRODUCT } from './kit';

/**
 * How long a retry asks again while the server says the first request with its key
 * is still in flight (409 IDEMPOTENCY_KEY_IN_USE): a claim whose write was lost
 * lapses after the wait budget plus the command timeouts.
 */
const IN_FLIGHT_BOUND_MS = 20_000;

/** What the retries of the OUTCOME_UNKNOWN buyers found. */
export interface Retries {
  readonly retried: number;
  /** 201 with the order that had been written for it. */
  readonly returned: number;
  /** 201 with a new order: nothing had been written for it. */
  readonly afresh: number;
  /** Retries whose answer does not say what became of the first request, by code. */
  readonly unresolved: Record<string, number>;
  /** Retries told IDEMPOTENCY_KEY_IN_USE first, which asked again until decided. */
  readonly waitedInFlight: number;
  /** orderId of every 201 a retry got. */
  readonly orderIds: string[];
  /** The buyers whose first request had been written, per the stream before the retries. */
  readonly written: number;
  /** Each retry as a request of the sale's history (asked again while in flight: one request, first ask to answer). */
  readonly requests: RequestRecord[];
}

/** A buyer's answer and the URL of the app that gave it: a retry goes back there. */
export interface Heard extends Answer {
  readonly url: string;
}

/**
 * Retries every OUTCOME_UNKNOWN of `told` once, with its key and body, at the app that
 * answered it, and says what each found, judged against `before` (the sale read from
 * Redis before the retries): its written order back, a purchase or a final SOLD_OUT
 * if nothing had been written, or unresolved.
 */
export async function retryUnknown(
  told: readonly Heard[],
  before: SaleSnapshot,
): Promise<{ retries: Retries; answers: Answer[] }> {
  const unknown = told.filter((t) => t.code === 'OUTCOME_UNKNOWN');
  const written = ordersByUser(before);
  const outcomes = await Promise.all(unknown.map((t) => retry(t)));
  const unresolved: Record<string, number> = {};
  let returned = 0;
  let afresh = 0;
  let wasWritten = 0;
  outcomes.forEach(({ answer }, i) => {
    const earlier = written.get(unknown[i].userId) ?? [];
    if (earlier.length > 0) wasWritten++;
    if (answer.orderId && earlier.includes(answer.orderId)) returned++;
    else if (answer.orderId && earlier.length === 0) afresh++;
    // Resolved: the order it had, or (none written) a purchase now or a final refusal.
    const resolved =
      earlier.length > 0
        ? answer.orderId !== undefined && earlier.includes(answer.orderId)
        : answer.orderId !== undefined || answer.code === 'SOLD_OUT' || answer.code === 'INSUFFICIENT_STOCK';
    if (!resolved) {
      const why = `${answer.code}${earlier.length > 0 ? ' (written)' : ''}`;
      unresolved[why] = (unresolved[why] ?? 0) + 1;
    }
  });
  return {
    retries: {
      retried: unknown.length,
      returned,
      afresh,
      unresolved,
      waitedInFlight: outcomes.filter((o) => o.waited).length,
      orderIds: outcomes.flatMap((o) => (o.answer.orderId ? [o.answer.orderId] : [])),
      written: wasWritten,
      requests: outcomes.map((o) => o.record),
    },
    answers: outcomes.map((o) => o.answer),
  };
}

/** One retry of a request answered OUTCOME_UNKNOWN: the same key and body, to the same app. */
async function retry(t: Heard): Promise<{ answer: Answer; waited: boolean; record: RequestRecord }> {
  const headers: Record<string, string> = t.idempotencyKey ? { 'idempotency-key': t.idempotencyKey } : {};
  const firstSentAt = historyNow();
  const deadline = Date.now() + IN_FLIGHT_BOUND_MS;
  for (let waited = false; ; waited = true) {
    const sentAt = Date.now();
    const res = await request(t.url, 'POST', '/api/orders', {
      json: { productId: PRODUCT, userId: t.userId, quantity: 1 },
      headers,
    });
    const code = res.status === 201 ? 'CREATED' : String(res.body?.code ?? `HTTP_${res.status}`);
    // "Still being decided" is no answer yet: ask again when the server says to, as a client would.
    if (code === 'IDEMPOTENCY_KEY_IN_USE' && Date.now() < deadline) {
      await sleep(Number(res.headers.get('retry-after') ?? 0.5) * 1_000);
      continue;
    }
    const orderId = res.status === 201 && typeof res.body?.orderId === 'string' ? res.body.orderId : undefined;
    return {
      answer: { userId: t.userId, idempotencyKey: t.idempotencyKey, status: res.status, code, orderId, sentAt },
      waited,
      // From its first ask: an IN_USE answer decided nothing, so the operation spans every ask.
      record: {
        userId: t.userId,
        productId: PRODUCT,
        quantity: 1,
        sentAt: firstSentAt,
        answeredAt: historyNow(),
        status: res.status,
        code,
        ...(orderId && { orderId }),
      },
    };
  }
}

export function ordersByUser(sale: { orders: { userId: string; orderId: string }[] }): Map<string, string[]> {
  const by = new Map<string, string[]>();
  for (const o of sale.orders) by.set(o.userId, [...(by.get(o.userId) ?? []), o.orderId]);
  return by;
}
