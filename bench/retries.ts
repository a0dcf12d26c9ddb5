import { setTimeout as sleep } from 'node:timers/promises';
import { request } from '../harness/http';
import type { RequestRecord } from './history/history';
import type { Answer, LoadResult, Recording } from './load';
import { historyNow } from './history/clock';

/** Retries sent at once. */
const PARALLEL = 50;
/** Pause before asking again about a key another request is still deciding (409 IDEMPOTENCY_KEY_IN_USE). */
const IN_USE_PAUSE_MS = 200;

export interface RetrySummary {
  /** Buyers whose answer was a 503 and who retried with their Idempotency-Key. */
  readonly buyers: number;
  /** Retry requests sent. */
  readonly sent: number;
  /** How the buyers ended, by the last answer's code (CREATED for a 201). */
  readonly outcomes: Record<string, number>;
  /** 201s that answered an order placed earlier (Idempotent-Replayed). */
  readonly replayed: number;
}

/**
 * `--retries N`: every buyer told 503 retries, up to N times, with the same
 * Idempotency-Key and body, as a careful client does; a 409 IDEMPOTENCY_KEY_IN_USE
 * (still being decided) is asked again after a pause. Returns the load with the
 * retries' orderIds added, so the verdict's exactly-once check covers them (a retry
 * answered its earlier order is the same orderId, once in the stream), each retried
 * buyer counted by its last answer, and every retry a request of the history.
 */
export async function retryFailed(
  url: string,
  productId: string,
  quantity: number,
  answers: readonly Answer[],
  retries: number,
  load: LoadResult,
): Promise<{ load: LoadResult; summary: RetrySummary }> {
  const pending = answers.filter((a) => a.status >= 500 && a.idempotencyKey);
  const outcomes: Record<string, number> = {};
  const orderIds: string[] = [];
  const records: RequestRecord[] = [];
  let sent = 0;
  let replayed = 0;
  // A buyer's answer is its last one: a 503 resolved by a retry no longer counts as a 5xx.
  const status = { ...load.status };
  const codes = { ...load.codes };
  const retryOne = async (a: Answer) => {
    let code = a.code;
    let last = a.status;
    for (let attempt = 0; attempt < retries; attempt++) {
      sent++;
      // Kept before it is sent: a retry that never gets an answer is in the history as one with no outcome.
      const record: Recording = {
        userId: a.userId,
        productId,
        quantity,
        sentAt: historyNow(),
        answeredAt: null,
        status: null,
        code: null,
      };
      records.push(record);
      const res = await request<{ code?: string; orderId?: string }>(url, 'POST', '/api/orders', {
        json: { productId, userId: a.userId, quantity },
        headers: { 'idempotency-key': a.idempotencyKey! },
      });
      last = res.status;
      code = res.status === 201 ? 'CREATED' : (res.body.code ?? `HTTP_${res.status}`);
      Object.assign(
        record,
        { answeredAt: historyNow(), status: res.status, code },
        res.status === 201 && { orderId: res.body.orderId },
      );
      if (res.status === 201) {
        orderIds.push(res.body.orderId!);
        if (res.headers.get('idempotent-replayed') === 'true') replayed++;
        break;
      }
      if (code === 'IDEMPOTENCY_KEY_IN_USE') await sleep(IN_USE_PAUSE_MS);
      else if (res.status < 500) break; // a final answer: refused, nothing to retry
    }
    outcomes[code] = (outcomes[code] ?? 0) + 1;
    status[a.status] -= 1;
    status[last] = (status[last] ?? 0) + 1;
    codes[a.code] -= 1;
    codes[code] = (codes[code] ?? 0) + 1;
  };
  for (let i = 0; i < pending.length; i += PARALLEL) {
    await Promise.all(pending.slice(i, i + PARALLEL).map(retryOne));
  }
  return {
    load: {
      ...load,
      status,
      codes,
      orderIds: [...load.orderIds, ...orderIds],
      ...(load.requests && { requests: [...load.requests, ...records] }),
    },
    summary: { buyers: pending.length, sent, outcomes, replayed },
  };
}
