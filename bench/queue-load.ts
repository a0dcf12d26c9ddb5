/**
 * `--queue RATE`: the sale behind its waiting room, bought the way a buyer does. Each
 * buyer joins (POST /api/products/:id/queue), reads its ticket again when Retry-After
 * says while it waits, and buys once admitted, with its pass as Admission-Pass through
 * the product's purchase route. A buyer told the product is sold out (a join refused
 * SOLD_OUT, or a ticket that reads sold_out) stops there.
 *
 * The answers are one LoadResult, as the other loads give, so the verdict judges the
 * sale alike: every request answered, the orders read from Redis, each purchase a
 * request of the history (bench/history/); queueVerdict adds the queue's own promise,
 * read from Redis too: every order is an admitted buyer's.
 */
import { Agent, request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { ProductKeys } from '../src/redis/key-layout';
import type { RequestRecord } from './history/history';
import { latencyCurve } from './latency-curve';
import { buyerSequence, cannon, LoadOptions, LoadResult, mergeLoads, Recording } from './load';
import { historyNow } from './history/clock';
import { unitsLeft } from './buckets';

/** What the waiting room did for the load: requests of each kind, and the buyers it turned away. */
export interface QueueFigures {
  readonly admitPerSecond: number;
  readonly joins: number;
  readonly reads: number;
  readonly purchases: number;
  /** Buyers admitted (a pass received), and those refused or told sold out without one. */
  readonly admitted: number;
  readonly turnedAway: number;
}

/** One request of a wave: whose, and what it asks. */
interface Step {
  readonly userId: string;
  readonly method: 'POST' | 'GET';
  readonly path: string;
  readonly body?: string;
  readonly headers: Record<string, string>;
}

/** How often the readers look for buyers whose Retry-After has come while the joins go on (ms). */
const READ_TICK_MS = 50;

/** A ticket's answer (a join's 202 or a read's 200) as the counted code: QUEUE_WAITING, QUEUE_ADMITTED, ... */
const ticketCode = (state: unknown) => `QUEUE_${String(state).toUpperCase()}`;

/**
 * --target with several URLs: the buyers spread over the deployment's instances, each
 * buyer's whole way (join, ticket reads, purchase) at one of them, as a client keeps its
 * connection; the waiting room is the deployment's, in Redis, whichever instance a buyer
 * reaches. The loads are one for the verdict, and their figures summed.
 */
export async function loadThroughQueueAt(
  urls: readonly string[],
  options: LoadOptions,
  admitPerSecond: number,
  progress: { done: number } = { done: 0 },
): Promise<{ load: LoadResult; queue: QueueFigures }> {
  if (urls.length < 2) return loadThroughQueue(options, admitPerSecond, progress);
  const ids = options.userIds ?? buyerSequence(options.buyers, options.duplicates, Math.random, options.userPrefix);
  // Each distinct buyer dealt to an instance in the order it first comes; its duplicates follow it.
  const at = new Map<string, number>();
  for (const id of ids) if (!at.has(id)) at.set(id, at.size % urls.length);
  const parts = await Promise.all(
    urls.map((url, k) =>
      loadThroughQueue(
        {
          ...options,
          url,
          userIds: ids.filter((id) => at.get(id) === k),
          connections: Math.max(1, Math.ceil(options.connections / urls.length)),
        },
        admitPerSecond,
        progress,
      ),
    ),
  );
  const merged = mergeLoads(parts.map((p) => p.load));
  const sum = (pick: (q: QueueFigures) => number) => parts.reduce((a, p) => a + pick(p.queue), 0);
  return {
    // One history, in sending order.
    load: { ...merged, requests: [...merged.requests!].sort((a, b) => a.sentAt - b.sentAt) },
    queue: {
      admitPerSecond,
      joins: sum((q) => q.joins),
      reads: sum((q) => q.reads),
      purchases: sum((q) => q.purchases),
      admitted: sum((q) => q.admitted),
      turnedAway: sum((q) => q.turnedAway),
    },
  };
}

/**
 * Runs every buyer's way through the queue to the end: bought, or told there is nothing
 * left. The joins go out as one burst (autocannon, as the other loads); a buyer admitted
 * buys at once, on sockets of its own, while the burst goes on; the buyers told to wait
 * read their tickets, each when its Retry-After comes, until none waits.
 */
export async function loadThroughQueue(
  options: LoadOptions,
  admitPerSecond: number,
  progress: { done: number } = { done: 0 },
): Promise<{ load: LoadResult; queue: QueueFigures }> {
  const base = new URL(options.url);
  const product = encodeURIComponent(options.productId);
  const ids = options.userIds
    ? [...options.userIds]
    : buyerSequence(options.buyers, options.duplicates, Math.random, options.userPrefix ?? 'b');
  const status: Record<string, number> = {};
  const codes: Record<string, number> = {};
  const orderIds: string[] = [];
  // The purchases, the history's requests: a join or a ticket read buys nothing.
  const purchases: RequestRecord[] = [];
  const answered = new Set<string>();
  const latencies: number[] = [];
  const counts = { sent: 0, joins: 0, reads: 0, purchases: 0, errors: 0, timeouts: 0 };
  const admitted = new Set<string>();
  const turnedAway = new Set<string>();
  // Buyers to read their ticket again, and when (ms).
  let waiting: { userId: string; ticket: string; at: number }[] = [];
  const buying: Promise<void>[] = [];
  // Ticket reads and purchases each have keep-alive sockets of their own. An admitted
  // buyer buys at once on a connection of its own, as a real buyer does, not behind
  // other buyers' reads in this process's pool: with one pool for both, a wave of reads
  // (all the buyers whose Retry-After came in the same second) held the purchases back
  // and the sale sold out seconds later, which measured the pool, not the app.
  const readers = new Agent({ keepAlive: true, maxSockets: Math.min(options.connections, 256) });
  const buyers = new Agent({ keepAlive: true, maxSockets: options.connections });
  let lastAnswerAt = Date.now();

  const headersOf = (userId: string, json: boolean): Record<string, string> => {
    const token = options.tokens?.get(userId);
    return {
      ...(json && { 'content-type': 'application/json' }),
      ...(token && { authorization: `Bearer ${token}` }),
    };
  };
  const count = (userId: string, code: number, key: string) => {
    progress.done++;
    lastAnswerAt = Date.now();
    status[code] = (status[code] ?? 0) + 1;
    codes[key] = (codes[key] ?? 0) + 1;
    answered.add(userId);
  };

  /** A ticket's answer: the buyer buys, comes back later, or is done. */
  const onTicket = (userId: string, code: number, body: Record<string, unknown>, retryAfter: unknown) => {
    if (code !== 200 && code !== 202) {
      const key = String(body.code ?? `HTTP_${code}`);
      count(userId, code, key);
      if (key === 'SOLD_OUT' || key === 'SALE_ENDED') turnedAway.add(userId);
      return;
    }
    count(userId, code, ticketCode(body.state));
    if (body.state === 'admitted') {
      admitted.add(userId);
      buying.push(buy(userId, String(body.pass)));
    } else if (body.state === 'waiting') {
      // Back when the answer says: Retry-After is the seconds until this place is likely admitted.
      waiting.push({ userId, ticket: String(body.ticket), at: Date.now() + Number(retryAfter ?? 1) * 1000 });
    } else if (body.state === 'sold_out' || body.state === 'ended') {
      turnedAway.add(userId);
    }
    // used (a duplicate of a buyer who bought) or expired: nothing more to do.
  };

  /**
   * One request over the load's own keep-alive sockets: an admitted buyer's purchase
   * (with its pass), or a waiting buyer's ticket read. Settles once, whatever happens
   * to the connection: an answer, an error or a timeout (counted once each).
   */
  const send = (step: Step, answer: (code: number, body: Record<string, unknown>, retryAfter: unknown) => void) => {
    const headers = {
      ...step.headers,
      ...(step.body !== undefined && { 'content-length': String(Buffer.byteLength(step.body)) }),
    };
    counts.sent++;
    const started = performance.now();
    return new Promise<void>((resolve) => {
      let settled = false;
      const settle = (fate: 'answered' | 'error' | 'timeout') => {
        if (settled) return;
        settled = true;
        if (fate === 'error') counts.errors++;
        if (fate === 'timeout') counts.timeouts++;
        resolve();
      };
      const req = httpRequest(
        {
          host: base.hostname,
          port: base.port,
          path: step.path,
          method: step.method,
          headers,
          agent: step.method === 'POST' ? buyers : readers,
          timeout: 30_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            if (settled) return;
            latencies.push(performance.now() - started);
            answer(res.statusCode!, parse(Buffer.concat(chunks).toString('utf8')), res.headers['retry-after']);
            settle('answered');
          });
          // A connection lost after the head: no end will come.
          res.on('close', () => settle('error'));
        },
      );
      req.on('timeout', () => {
        settle('timeout');
        req.destroy();
      });
      req.on('error', () => settle('error'));
      req.end(step.body);
    });
  };

  /** An admitted buyer's purchase, with its pass, sent at once. */
  const buy = (userId: string, pass: string): Promise<void> => {
    counts.purchases++;
    const record: Recording = {
      userId,
      productId: options.productId,
      quantity: options.quantity,
      sentAt: historyNow(),
      answeredAt: null,
      status: null,
      code: null,
    };
    purchases.push(record);
    return send(
      {
        userId,
        method: 'POST',
        path: `/api/products/${product}/orders`,
        body: JSON.stringify({ userId, quantity: options.quantity }),
        headers: { ...headersOf(userId, true), 'admission-pass': pass },
      },
      (code, body) => {
        const key = code === 201 ? 'CREATED' : String(body.code ?? `HTTP_${code}`);
        count(userId, code, key);
        const orderId = code === 201 && typeof body.orderId === 'string' ? body.orderId : undefined;
        if (orderId) orderIds.push(orderId);
        Object.assign(record, { answeredAt: historyNow(), status: code, code: key }, orderId && { orderId });
      },
    );
  };

  /** A waiting buyer reads its ticket, when its Retry-After has come. */
  const read = (w: { userId: string; ticket: string }): Promise<void> => {
    counts.reads++;
    return send(
      {
        userId: w.userId,
        method: 'GET',
        path: `/api/products/${product}/queue/${w.ticket}`,
        headers: headersOf(w.userId, false),
      },
      (code, body, retryAfter) => onTicket(w.userId, code, body, retryAfter),
    );
  };

  /** The burst of joins, over the load's connections (autocannon). */
  const wave = async (steps: readonly Step[]): Promise<void> => {
    let next = 0;
    const result = await cannon(options.signal, (ms) => latencies.push(ms), {
      url: options.url,
      connections: Math.min(options.connections, steps.length),
      amount: steps.length,
      timeout: 30,
      requests: [
        {
          setupRequest: (request, context: object) => {
            const step = steps[next++];
            (context as { userId: string }).userId = step.userId;
            return { ...request, method: step.method, path: step.path, headers: step.headers, body: step.body };
          },
          onResponse: (code, body, context: object, headers?: Record<string, unknown>) => {
            const retryAfter = headers && Object.entries(headers).find(([h]) => h.toLowerCase() === 'retry-after')?.[1];
            onTicket((context as { userId: string }).userId, code, parse(body), retryAfter);
          },
        },
      ],
    });
    counts.sent += result.requests.sent;
    counts.errors += result.errors;
    counts.timeouts += result.timeouts;
  };

  const startedAt = Date.now();
  try {
    let joining = true;
    const joins = wave(
      ids.map((userId) => ({
        userId,
        method: 'POST',
        path: `/api/products/${product}/queue`,
        body: JSON.stringify({ userId }),
        headers: headersOf(userId, true),
      })),
    ).finally(() => (joining = false));
    // Meanwhile, and after, each waiting buyer reads its ticket when its Retry-After comes,
    // over the load's own keep-alive sockets (a burst tool would open new ones each time).
    let readsInFlight = 0;
    const reads = (async () => {
      while ((joining || waiting.length > 0 || readsInFlight > 0) && !options.signal?.aborted) {
        let first = Date.now() + READ_TICK_MS;
        for (const w of waiting) first = Math.min(first, w.at);
        await sleep(Math.max(0, first - Date.now()));
        const now = Date.now();
        const due = waiting.filter((w) => w.at <= now);
        if (due.length === 0) continue;
        waiting = waiting.filter((w) => w.at > now);
        readsInFlight += due.length;
        for (const w of due) void read(w).finally(() => readsInFlight--);
      }
    })();
    await Promise.all([joins, reads]);
    await Promise.all(buying);
  } finally {
    readers.destroy();
    buyers.destroy();
  }
  const sorted = [...latencies].sort((a, b) => a - b);
  const at = (p: number) =>
    sorted.length ? Math.round(sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]) : 0;
  return {
    load: {
      sent: counts.sent,
      status,
      codes,
      errors: counts.errors,
      timeouts: counts.timeouts,
      orderIds,
      distinctBuyers: answered.size,
      startedAt,
      durationMs: Math.max(lastAnswerAt - startedAt, 1),
      latency: { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: Math.round(sorted[sorted.length - 1] ?? 0) },
      latencyCurve: latencyCurve(latencies),
      requests: purchases,
    },
    queue: {
      admitPerSecond,
      joins: ids.length,
      reads: counts.reads,
      purchases: counts.purchases,
      admitted: admitted.size,
      turnedAway: turnedAway.size,
    },
  };
}

function parse(body: string): Record<string, unknown> {
  try {
    return JSON.parse(body) as Record<string, unknown>;
  } catch {
    return {};
  }
}

/**
 * The waiting room's promise, read from Redis: every order was bought by a buyer the
 * queue admitted (a ticket at or before the last admitted place), and no more passes
 * are outstanding (issued, not lapsed, not used) than the stock left can serve: its
 * units by the sale's limit, or one pass for a remainder below the limit (queue-5.lua).
 * A product in escrow buckets: its queue is bucket 0's (`k`), its units those of every
 * bucket and move in flight (bench/buckets.ts). Null when it holds; else what broke.
 */
export async function queueVerdict(
  client: Pick<Redis, 'hmget' | 'zrangebyscore' | 'get' | 'time' | 'hgetall'>,
  k: ProductKeys,
  orders: readonly { userId: string }[],
  perUserLimit: number,
  buckets: readonly ProductKeys[] = [k],
): Promise<string | null> {
  const lastAdmitted = Number((await client.hmget(k.meta, 'queueAdmitted'))[0] ?? 0);
  const users = [...new Set(orders.map((o) => o.userId))];
  const outside: string[] = [];
  for (let i = 0; i < users.length; i += 1000) {
    const chunk = users.slice(i, i + 1000);
    const tickets = await client.hmget(k.queue, ...chunk.map((u) => `u:${u}`));
    const records = await client.hmget(k.queue, ...tickets.map((t) => `t:${t ?? ''}`));
    records.forEach((record, j) => {
      const position = record === null ? Infinity : Number(record.split('|')[0]);
      if (!(position <= lastAdmitted)) outside.push(chunk[j]);
    });
  }
  const [s, us] = await client.time();
  const now = Number(s) * 1000 + Math.floor(Number(us) / 1000);
  const live = await client.zrangebyscore(k.admitted, `(${now}`, '+inf');
  // A pass whose purchase was written is spent, even if its removal from the set was
  // lost: its outcome (in its buyer's home bucket, whichever that is), or its mark `y:<pass>`.
  const spent = new Set<number>();
  if (live.length > 0) {
    const marks = await client.hmget(k.queue, ...live.map((p) => `y:${p}`));
    marks.forEach((mark, i) => mark !== null && spent.add(i));
    for (const b of buckets) {
      const outcomes = await client.hmget(b.idem, ...live.map((p) => `pass ${p}`));
      outcomes.forEach((o, i) => o?.startsWith('D|') && spent.add(i));
    }
  }
  const outstanding = live.length - spent.size;
  const stockLeft = await unitsLeft(client, buckets);
  const room = Math.max(Math.floor(stockLeft / perUserLimit), stockLeft > 0 ? 1 : 0);
  const problems = [
    outside.length > 0 &&
      `${outside.length} buyers with orders were never admitted (e.g. ${outside.slice(0, 3).join(', ')})`,
    outstanding > room && `${outstanding} passes outstanding for ${stockLeft} units left (limit ${perUserLimit} each)`,
  ].filter(Boolean);
  return problems.length > 0 ? `queue: ${problems.join('; ')}` : null;
}
