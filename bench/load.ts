import autocannon from 'autocannon';
import { randomBytes } from 'node:crypto';
import { historyNow } from './history/clock';
import type { RequestRecord } from './history/history';
import { LatencyPoint, latencyCurve } from './latency-curve';
import type { LoadProgress } from './progress';

export interface LoadOptions {
  readonly url: string;
  readonly productId: string;
  /**
   * Spread the buyers over these products instead of `productId`: buyer i buys
   * productIds[i % n], every one of its requests (duplicates included) to that product,
   * so a per-user limit holds per product. The result then counts each product apart.
   */
  readonly productIds?: readonly string[];
  /** Distinct userIds, one purchase request each. */
  readonly buyers: number;
  /** Fraction of extra requests that reuse an earlier userId. */
  readonly duplicates: number;
  readonly connections: number;
  readonly quantity: number;
  /** Put before every userId, so loads on several apps have distinct buyers. */
  readonly userPrefix?: string;
  /** Aborting it ends the load early (its app was killed); what was answered is kept. */
  readonly signal?: AbortSignal;
  /**
   * Send an Idempotency-Key header with every request, a fresh key for each (so one
   * per buyer when there are no duplicates: a duplicate is a second purchase, not a
   * retry), as a client that may retry does. Off by default.
   */
  /** These buyers, in this order, instead of `buyers` (with `duplicates`) generated ones. */
  readonly userIds?: readonly string[];
  /** Buy through POST /api/products/:id/orders (the product in the URL), not POST /api/orders. */
  readonly productPath?: boolean;
  readonly idempotencyKeys?: boolean;
  /** --auth: each buyer's token (by userId), sent as `Authorization: Bearer`; minted before the load. */
  readonly tokens?: ReadonlyMap<string, string>;
  /** Called with every answer, for a caller that keeps the history (who was told what). */
  readonly onAnswer?: (answer: Answer) => void;
}

/** One answer the load received, and the request it answered. */
export interface Answer {
  readonly userId: string;
  /** The request's Idempotency-Key, when the load sends them. */
  readonly idempotencyKey?: string;
  readonly status: number;
  /** The error `code`, or CREATED for a 201 (as LoadResult.codes counts them). */
  readonly code: string;
  readonly orderId?: string;
  /** When the request was handed to its socket (Date.now()). */
  readonly sentAt: number;
}

export interface LoadResult {
  /** Requests autocannon wrote to a socket. */
  readonly sent: number;
  /** Responses seen, per HTTP status. */
  readonly status: Record<string, number>;
  /** Responses seen, per error `code` (201s count as CREATED). */
  readonly codes: Record<string, number>;
  readonly errors: number;
  readonly timeouts: number;
  /** orderId of every 201. */
  readonly orderIds: string[];
  /** Distinct userIds that got any answer. */
  readonly distinctBuyers: number;
  readonly startedAt: number;
  readonly durationMs: number;
  readonly latency: { p50: number; p90: number; p99: number; max: number };
  /**
   * Every answer's latency as a percentile curve (bench/latency-curve.ts). Absent from
   * a result summed from several loads (bench/faults/kit.ts): a curve cannot be summed.
   */
  readonly latencyCurve?: LatencyPoint[];
  /** With `productIds`: what each product's buyers were answered. */
  readonly byProduct?: Readonly<Record<string, ProductLoad>>;
  /**
   * Every request sent, in sending order, with its answer (none when it never came):
   * the client's half of the sale's history (bench/history/). Absent from a load that
   * did not keep it.
   */
  readonly requests?: readonly RequestRecord[];
}

/**
 * The part of a load the verdict reads, for the whole load or one product's share of it.
 * A product's share has no errors or timeouts of its own (autocannon counts them for
 * the whole load, without the request): a request that failed so is one sent to the
 * product and never answered, which its accounting sees.
 */
export type ProductLoad = Pick<
  LoadResult,
  'sent' | 'status' | 'codes' | 'errors' | 'timeouts' | 'orderIds' | 'distinctBuyers' | 'startedAt' | 'requests'
>;

/** A request's record while it is in flight: its answer is filled in when it comes. */
export type Recording = { -readonly [K in keyof RequestRecord]: RequestRecord[K] };

/** autocannon's per-connection context: the request in flight. */
interface BuyerContext {
  userId: string;
  productId: string;
  idempotencyKey?: string;
  sentAt: number;
  record: Recording;
}

/** One product's tally while the load runs. */
interface Tally {
  sent: number;
  readonly status: Record<string, number>;
  readonly codes: Record<string, number>;
  readonly orderIds: string[];
  readonly answered: Set<string>;
  readonly requests: RequestRecord[];
}

const tally = (): Tally => ({ sent: 0, status: {}, codes: {}, orderIds: [], answered: new Set(), requests: [] });

/** The userIds to send, in sending order: every buyer once, plus duplicates, shuffled. */
export function buyerSequence(buyers: number, duplicates: number, random = Math.random, prefix = 'b'): string[] {
  const ids = Array.from({ length: buyers }, (_, i) => `${prefix}${i}`);
  const extra = Math.round(buyers * duplicates);
  for (let i = 0; i < extra; i++) ids.push(`${prefix}${Math.floor(random() * buyers)}`);
  for (let i = ids.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [ids[i], ids[j]] = [ids[j], ids[i]];
  }
  return ids;
}

/**
 * Fires the whole sequence at POST /api/orders over `connections` keep-alive
 * connections (autocannon's programmatic API), recording every answer.
 * `progress.done` (and `progress.codes`, if given) is updated as answers arrive, for a live progress line.
 */
export async function runLoad(options: LoadOptions, progress: LoadProgress = { done: 0 }): Promise<LoadResult> {
  const prefix = options.userPrefix ?? 'b';
  const ids = options.userIds
    ? [...options.userIds]
    : buyerSequence(options.buyers, options.duplicates, Math.random, prefix);
  const spread = options.productIds;
  // Buyer i's product, round-robin, looked up by userId (a duplicate is a buyer asking again).
  const productOf = new Map<string, string>();
  for (let i = 0; spread && i < options.buyers; i++) productOf.set(`${prefix}${i}`, spread[i % spread.length]);
  const tallies = new Map<string, Tally>((spread ?? []).map((id) => [id, tally()]));
  const status: Record<string, number> = {};
  const codes: Record<string, number> = {};
  const orderIds: string[] = [];
  const answered = new Set<string>();
  // Keys unique to this run, so two loads on one sale never share one.
  const run = randomBytes(6).toString('hex');
  let next = 0;
  let lastAnswerAt = Date.now();
  // Every answer's, in ms (autocannon times each request with hrtime): for the full curve.
  const latencies: number[] = [];
  const records: RequestRecord[] = [];

  const startedAt = Date.now();
  const result = await cannon(options.signal, (ms) => latencies.push(ms), {
    url: options.url,
    connections: Math.min(options.connections, ids.length),
    amount: ids.length,
    // Longer than LOCK_WAIT_MS, so a slow answer is the app's 503, not our timeout.
    timeout: 30,
    requests: [
      {
        method: 'POST',
        path: '/api/orders',
        headers: { 'content-type': 'application/json' },
        setupRequest: (request, context: object) => {
          const userId = ids[next++];
          const buyer = context as BuyerContext;
          buyer.userId = userId;
          buyer.sentAt = Date.now();
          buyer.productId = productOf.get(userId) ?? options.productId;
          buyer.record = {
            userId,
            productId: buyer.productId,
            quantity: options.quantity,
            sentAt: historyNow(),
            answeredAt: null,
            status: null,
            code: null,
          };
          records.push(buyer.record);
          const product = tallies.get(buyer.productId);
          if (product) {
            product.sent++;
            product.requests.push(buyer.record);
          }
          buyer.idempotencyKey = options.idempotencyKeys ? `${run}-${next}` : undefined;
          const token = options.tokens?.get(userId);
          const headers = {
            ...request.headers,
            ...(buyer.idempotencyKey && { 'idempotency-key': buyer.idempotencyKey }),
            ...(token && { authorization: `Bearer ${token}` }),
          };
          return {
            ...request,
            headers,
            ...(options.productPath
              ? {
                  path: `/api/products/${buyer.productId}/orders`,
                  body: JSON.stringify({ userId, quantity: options.quantity }),
                }
              : { body: JSON.stringify({ productId: buyer.productId, userId, quantity: options.quantity }) }),
          };
        },
        onResponse: (code, body, context: object) => {
          progress.done++;
          lastAnswerAt = Date.now();
          status[code] = (status[code] ?? 0) + 1;
          answered.add((context as BuyerContext).userId);
          const parsed = parse(body);
          const key = code === 201 ? 'CREATED' : String(parsed.code ?? `HTTP_${code}`);
          codes[key] = (codes[key] ?? 0) + 1;
          if (progress.codes) progress.codes[key] = (progress.codes[key] ?? 0) + 1;
          const orderId = code === 201 && typeof parsed.orderId === 'string' ? parsed.orderId : undefined;
          if (orderId) orderIds.push(orderId);
          const { userId, productId, idempotencyKey, sentAt, record } = context as BuyerContext;
          Object.assign(record, { answeredAt: historyNow(), status: code, code: key }, orderId && { orderId });
          const product = tallies.get(productId);
          if (product) {
            product.status[code] = (product.status[code] ?? 0) + 1;
            product.codes[key] = (product.codes[key] ?? 0) + 1;
            product.answered.add(userId);
            if (orderId) product.orderIds.push(orderId);
          }
          options.onAnswer?.({ userId, idempotencyKey, status: code, code: key, orderId, sentAt });
        },
      },
    ],
  });
  return {
    sent: result.requests.sent,
    status,
    codes,
    errors: result.errors,
    timeouts: result.timeouts,
    orderIds,
    distinctBuyers: answered.size,
    startedAt,
    // To the last answer: autocannon itself only notices the end on its next
    // one-second tick, which would pad every run by up to a second.
    durationMs: Math.max(lastAnswerAt - startedAt, 1),
    latency: { p50: result.latency.p50, p90: result.latency.p90, p99: result.latency.p99, max: result.latency.max },
    latencyCurve: latencyCurve(latencies),
    requests: records,
    ...(spread && {
      byProduct: Object.fromEntries(
        [...tallies].map(([id, t]): [string, ProductLoad] => [
          id,
          {
            sent: t.sent,
            status: t.status,
            codes: t.codes,
            errors: 0,
            timeouts: 0,
            orderIds: t.orderIds,
            distinctBuyers: t.answered.size,
            startedAt,
            requests: t.requests,
          },
        ]),
      ),
    }),
  };
}

function parse(body: string): { code?: unknown; orderId?: unknown } {
  try {
    return JSON.parse(body) as { code?: unknown; orderId?: unknown };
  } catch {
    return {};
  }
}

/**
 * autocannon as a promise that `signal` can end early (its callback form returns a
 * tracker with stop()); `latency` hears every answer's response time, whatever its status.
 */
export function cannon(
  signal: AbortSignal | undefined,
  latency: (ms: number) => void,
  opts: autocannon.Options,
): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    const tracker = autocannon(opts, (err, result) => (err ? reject(err) : resolve(result)));
    tracker.on('response', (_client, _status, _bytes, ms) => latency(ms));
    signal?.addEventListener('abort', () => tracker.stop(), { once: true });
  });
}

/** Several loads as one: counts summed, the latency bounds the worst of each (no curve: it cannot be summed). */
export function mergeLoads(loads: readonly LoadResult[]): LoadResult {
  const sum = (pick: (l: LoadResult) => Record<string, number>) => {
    const out: Record<string, number> = {};
    for (const l of loads) for (const [key, k] of Object.entries(pick(l))) out[key] = (out[key] ?? 0) + k;
    return out;
  };
  return {
    sent: loads.reduce((a, l) => a + l.sent, 0),
    status: sum((l) => l.status),
    codes: sum((l) => l.codes),
    errors: loads.reduce((a, l) => a + l.errors, 0),
    timeouts: loads.reduce((a, l) => a + l.timeouts, 0),
    orderIds: loads.flatMap((l) => l.orderIds),
    // A load that kept no history makes the sum's partial: none, rather than a history with holes.
    ...(loads.every((l) => l.requests) && { requests: loads.flatMap((l) => l.requests!) }),
    distinctBuyers: loads.reduce((a, l) => a + l.distinctBuyers, 0),
    startedAt: Math.min(...loads.map((l) => l.startedAt)),
    durationMs: Math.max(...loads.map((l) => l.durationMs)),
    latency: {
      p50: Math.max(...loads.map((l) => l.latency.p50)),
      p90: Math.max(...loads.map((l) => l.latency.p90)),
      p99: Math.max(...loads.map((l) => l.latency.p99)),
      max: Math.max(...loads.map((l) => l.latency.max)),
    },
  };
}

/**
 * --target with several URLs: the buyers spread over the deployment's instances, as a
 * load balancer would spread them. One buyer sequence, dealt round-robin, so a buyer's
 * duplicate may reach another instance than its first request did: the per-user limit
 * is the deployment's to keep, not one instance's.
 */
export async function spreadLoad(
  options: LoadOptions,
  urls: readonly string[],
  progress: LoadProgress = { done: 0 },
): Promise<LoadResult> {
  const ids = options.userIds ?? buyerSequence(options.buyers, options.duplicates, Math.random, options.userPrefix);
  const loads = await Promise.all(
    urls.map((url, k) =>
      runLoad(
        {
          ...options,
          url,
          userIds: ids.filter((_, i) => i % urls.length === k),
          connections: Math.max(1, Math.ceil(options.connections / urls.length)),
        },
        progress,
      ),
    ),
  );
  const merged = mergeLoads(loads);
  // One history, in sending order; a buyer answered by two instances is still one buyer.
  const requests = [...merged.requests!].sort((a, b) => a.sentAt - b.sentAt);
  const answered = new Set(requests.filter((r) => r.status !== null).map((r) => r.userId));
  return { ...merged, requests, distinctBuyers: answered.size };
}

/** One burst of buyers at `options.url`, or, given a deployment's several URLs, dealt over them. */
export function loadAt(
  urls: readonly string[] | undefined,
): (options: LoadOptions, progress?: LoadProgress) => Promise<LoadResult> {
  return urls && urls.length > 1 ? (options, progress) => spreadLoad(options, urls, progress) : runLoad;
}
