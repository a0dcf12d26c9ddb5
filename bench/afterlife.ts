import { randomBytes } from 'node:crypto';
import { JsonResponse, pay, request } from '../harness/http';

/**
 * The PAYMENT_WEBHOOK_SECRET of the apps this bench starts: it pays as the payment
 * provider does, each callback signed (src/door/payment-signature.ts). One per run.
 */
export const PAYMENT_SECRET = randomBytes(32).toString('base64url');

/** How the bench confirms a payment: POST /api/orders/:orderId/pay, answered. */
export type Payer = (url: string, orderId: string, paymentId: string) => Promise<JsonResponse>;

/** As the payment provider pays the apps this bench starts: a callback signed with PAYMENT_SECRET. */
export const signedPayment: Payer = (url, orderId, paymentId) => pay(url, orderId, paymentId, PAYMENT_SECRET);

/**
 * As an operator marks a payment by hand, with the admin token (the pay route takes
 * either): a deployment's PAYMENT_WEBHOOK_SECRET is its own, and the bench has its token.
 */
export const adminPayment =
  (token: string): Payer =>
  (url, orderId, paymentId) =>
    request(url, 'POST', `/api/orders/${orderId}/pay`, { json: { paymentId }, token });

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
 * `--pay F`'s three outcomes, decided for each order as its 201 arrives (so the
 * payment deadline only has to outlast a payment's round trip, not the whole sale): a
 * share F is paid at once, every second order of the rest is cancelled, the others are
 * left to expire at their deadline. Every answer is counted by code; the bench's
 * verdict fails on any but the 409s that say who won (ORDER_EXPIRED, ORDER_PAID,
 * ORDER_CANCELLED).
 */
export class Afterlife {
  private paid = 0;
  private cancelled = 0;
  private left = 0;
  private seen = 0;
  private readonly refused: Record<string, number> = {};
  private readonly waiting: (() => Promise<void>)[] = [];
  private running = 0;
  private idle?: () => void;

  constructor(
    private readonly url: string,
    private readonly pay: number,
    private readonly payer: Payer = signedPayment,
  ) {}

  /** A 201's order: paid, cancelled or left, by its place among the orders seen. */
  offer(orderId: string): void {
    const i = this.seen++;
    const payIt = Math.floor((i + 1) * this.pay) > Math.floor(i * this.pay);
    const unpaid = i + 1 - Math.floor((i + 1) * this.pay);
    if (!payIt && unpaid % 2 === 0) {
      this.left++;
      return;
    }
    this.waiting.push(async () => {
      const res = await (
        payIt ? this.payer(this.url, orderId, `pay-${i}`) : request(this.url, 'POST', `/api/orders/${orderId}/cancel`)
      ).catch((err: Error) => ({ status: 0, body: { code: `network: ${err.message}` } }));
      if (res.status === 200) {
        if (payIt) this.paid++;
        else this.cancelled++;
        return;
      }
      const code = String((res.body as { code?: string }).code ?? res.status);
      this.refused[code] = (this.refused[code] ?? 0) + 1;
    });
    this.pump();
  }

  /** Once every payment and cancel sent has been answered. */
  async done(): Promise<AfterlifeResult> {
    if (this.running > 0 || this.waiting.length > 0) await new Promise<void>((resolve) => (this.idle = resolve));
    return { paid: this.paid, cancelled: this.cancelled, leftToExpire: this.left, refused: { ...this.refused } };
  }

  private pump(): void {
    while (this.running < PARALLEL && this.waiting.length > 0) {
      const job = this.waiting.shift()!;
      this.running++;
      void job().finally(() => {
        this.running--;
        this.pump();
        if (this.running === 0 && this.waiting.length === 0) this.idle?.();
      });
    }
  }
}

/** Pays every order given (the second wave pays at once); what was refused, by code. */
export async function payAll(
  url: string,
  orderIds: readonly string[],
  payer: Payer = signedPayment,
): Promise<Record<string, number>> {
  const refused: Record<string, number> = {};
  await inParallel(
    orderIds.map((orderId, i) => async () => {
      const res = await payer(url, orderId, `wave2-${i}`);
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
