import { request } from '../harness/http';

/** What the afterlife of a sale's orders was answered. */
export interface AfterlifeResult {
  /** Orders paid (200), cancelled (200), left to expire. */
  readonly paid: number;
  readonly cancelled: number;
  readonly leftToExpire: number;
  /** Answers that were not 200, by code (a payment that lost to the deadline: ORDER_EXPIRED). */
  readonly refused: Record<string, number>;
}

/** Requests in flight at once: the afterlife is a trickle next to the sale. */
const PARALLEL = 32;

/**
 * Pays `pay` of the orders (in the order given), cancels half of the rest, and leaves
 * the others to expire at their payment deadline: `--pay`'s three outcomes. Every
 * answer is counted; a 5xx or a network error fails the run (the caller checks).
 */
export async function payCancelExpire(url: string, orderIds: readonly string[], pay: number): Promise<AfterlifeResult> {
  const toPay = Math.round(orderIds.length * pay);
  const toCancel = Math.floor((orderIds.length - toPay) / 2);
  const refused: Record<string, number> = {};
  let paid = 0;
  let cancelled = 0;
  const jobs = orderIds.slice(0, toPay + toCancel).map((orderId, i) => async () => {
    const payIt = i < toPay;
    const res = await request(url, 'POST', `/api/orders/${orderId}/${payIt ? 'pay' : 'cancel'}`, {
      ...(payIt ? { json: { paymentId: `pay-${i}` } } : {}),
    });
    if (res.status === 200) {
      if (payIt) paid++;
      else cancelled++;
      return;
    }
    const code = String(res.body.code ?? res.status);
    refused[code] = (refused[code] ?? 0) + 1;
  });
  await inParallel(jobs, PARALLEL);
  return { paid, cancelled, leftToExpire: orderIds.length - toPay - toCancel, refused };
}

/** Pays every order given (the second wave pays at once); what was refused, by code. */
export async function payAll(url: string, orderIds: readonly string[]): Promise<Record<string, number>> {
  const refused: Record<string, number> = {};
  await inParallel(
    orderIds.map((orderId, i) => async () => {
      const res = await request(url, 'POST', `/api/orders/${orderId}/pay`, { json: { paymentId: `wave2-${i}` } });
      if (res.status === 200) return;
      const code = String(res.body.code ?? res.status);
      refused[code] = (refused[code] ?? 0) + 1;
    }),
    PARALLEL,
  );
  return refused;
}

async function inParallel(jobs: readonly (() => Promise<void>)[], width: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, jobs.length) }, async () => {
      while (next < jobs.length) await jobs[next++]();
    }),
  );
}
