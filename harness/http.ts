import { setTimeout as sleep } from 'node:timers/promises';
import { PAYMENT_SIGNATURE_HEADER, signPayment } from '../src/door/payment-signature';

export interface JsonResponse<T = Record<string, unknown>> {
  status: number;
  headers: Headers;
  body: T;
}

/**
 * fetch with a JSON body (unless `raw` is given) and a parsed JSON answer; `token` adds the
 * admin bearer; `timeoutMs` rejects (a TimeoutError) a server that does not answer in time.
 */
export async function request<T = Record<string, any>>(
  url: string,
  method: string,
  path: string,
  options: { json?: unknown; raw?: string; headers?: Record<string, string>; token?: string; timeoutMs?: number } = {},
): Promise<JsonResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  let body: string | undefined;
  if (options.json !== undefined) {
    headers['content-type'] ??= 'application/json';
    body = JSON.stringify(options.json);
  } else if (options.raw !== undefined) {
    body = options.raw;
  }
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  const signal = options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs);
  const res = await fetch(`${url}${path}`, { method, headers, body, signal });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

/**
 * POST /api/orders/:orderId/pay as the payment provider sends it: signed with `secret`
 * (the app's PAYMENT_WEBHOOK_SECRET) over the very bytes sent.
 */
export function pay(url: string, orderId: string, paymentId: string, secret: string): Promise<JsonResponse> {
  const body = JSON.stringify({ paymentId });
  return request(url, 'POST', `/api/orders/${orderId}/pay`, {
    raw: body,
    headers: { 'content-type': 'application/json', [PAYMENT_SIGNATURE_HEADER]: signPayment(secret, orderId, body) },
  });
}

/** Starts (or restarts) a sale through the admin API, or throws with what the app said. */
export async function startSale(
  url: string,
  token: string,
  productId: string,
  stock: number,
  perUserLimit = 1,
  paymentTimeoutMs?: number,
  /** More of the PUT's body: a window (startsAt, endsAt), a queue. */
  more: Record<string, unknown> = {},
): Promise<void> {
  // The harness starts every sale on purpose, a warm-up's orders included.
  const res = await request(url, 'PUT', `/api/products/${productId}`, {
    json: {
      stock,
      perUserLimit,
      discardOrders: true,
      ...(paymentTimeoutMs !== undefined && { paymentTimeoutMs }),
      ...more,
    },
    token,
  });
  if (res.status !== 200)
    throw new Error(`sale setup for ${productId} failed: ${res.status} ${JSON.stringify(res.body)}`);
}

/** PUTs in flight at once while a catalog is listed: 2,000 products take seconds, none waits long behind the others. */
const LISTING_PARALLEL = 16;

/**
 * Lists a catalog as an admin does, through the admin API: a sale of `stock` units for
 * each of `productIds` (startSale), at most LISTING_PARALLEL PUTs in flight on kept-alive
 * connections. Throws with the first PUT refused; no more are sent after it.
 */
export async function listProducts(
  url: string,
  token: string,
  productIds: readonly string[],
  stock: number,
  paymentTimeoutMs?: number,
): Promise<void> {
  let next = 0;
  let failed = false;
  const lister = async () => {
    while (!failed && next < productIds.length) {
      await startSale(url, token, productIds[next++], stock, 1, paymentTimeoutMs).catch((err: unknown) => {
        failed = true;
        throw err;
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(LISTING_PARALLEL, productIds.length) }, lister));
}

/** GET /health: its status code and body. */
export async function health(url: string): Promise<{ http: number; lostLocks?: number } & Record<string, unknown>> {
  const res = await fetch(`${url}/health`);
  return { ...((await res.json()) as Record<string, unknown>), http: res.status };
}

/**
 * The app's Redis client connects in the background: waits until /health says 200.
 * `failed` ends the wait early with its message (the app process exited).
 */
export async function waitForHealth(
  url: string,
  options: { timeoutMs?: number; failed?: () => string | null } = {},
): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const why = options.failed?.();
    if (why) throw new Error(why);
    const status = await fetch(`${url}/health`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return;
    if (Date.now() > deadline) throw new Error(`${url}/health did not answer 200 within ${timeoutMs} ms`);
    await sleep(20);
  }
}
