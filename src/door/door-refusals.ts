import type { OnModuleDestroy } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorBody } from '../errors/error-body';
import { AppError, SaleEndedError, SaleNotStartedError, SoldOutError } from '../errors/errors';
import type { PurchaseTelemetry } from '../telemetry/purchase-telemetry';

/**
 * How long a refusal Redis gave stays the door's answer for a product (ms). Past it,
 * the next purchase goes through to Redis again, and its answer is learnt afresh: so a
 * unit returned to stock (a cancelled or expired reservation, on any instance) or a sale
 * restarted elsewhere is seen within this long.
 */
export const DOOR_TRUST_MS = 250;

/** How close to the start the door stops answering SALE_NOT_STARTED itself and lets Redis's clock decide. */
export const START_MARGIN_MS = 250;

/**
 * POST /api/products/:id/orders and POST /api/products/:id/queue: the product is in the
 * URL, so the door can answer before the body is read.
 */
const PRODUCT_ROUTE = /^\/api\/products\/([A-Za-z0-9_-]{1,64})\/(orders|queue)$/;
/** Those routes as Fastify declares them: the route an answer at the door is timed under. */
const ROUTE_PATTERNS = { orders: '/api/products/:id/orders', queue: '/api/products/:id/queue' } as const;

interface Learnt {
  /** This process's clock (ms) until which the refusal is answered at the door. */
  readonly until: number;
  readonly refusal: SoldOutError | SaleEndedError | null;
  /** SALE_NOT_STARTED: the start, and Redis's clock minus ours when it was read. */
  readonly startsAt?: number;
  readonly offset?: number;
  /** The bytes of the answer, made once per refusal learnt. */
  readonly body?: Buffer;
}

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The door: refusals a product's URL alone decides (sold out, not started yet, ended),
 * answered on the HTTP server's request event, before Fastify parses, validates or
 * routes anything and before Nest sees the request. A flash sale's tail is mostly these:
 * the thousands who arrive before the start and the 99% who arrive after the sell-out.
 * Behind a waiting room the tail joins the queue instead of buying: a join after the
 * sell-out or the sale's end is refused SOLD_OUT or SALE_ENDED at the door the same way
 * (and nothing else is: the herd joins before the start).
 *
 * The door never decides anything itself: it repeats, for a short while, a refusal that
 * Redis gave to a purchase or a join through the normal path (learn()), as the batched purchase
 * path's sold-out signal does. A request with an Idempotency-Key or an Admission-Pass
 * always goes through: a retry must learn what became of its first attempt, which a
 * sold-out answer would hide. SALE_NOT_STARTED is answered by the door only while the
 * start is more than START_MARGIN_MS away by Redis's clock (this process's clock plus
 * the offset measured from Redis's answer, so a clock that runs ahead changes nothing);
 * near the start, every purchase goes to Redis, whose clock alone opens the sale.
 */
export class DoorRefusals implements OnModuleDestroy {
  private readonly learnt = new Map<string, Learnt>();
  /**
   * Sell-outs and ends a join was refused (learnJoin), kept apart from the purchases': a
   * product without a waiting room answers a join NO_QUEUE, and an ended sale's purchases
   * SALE_ENDED, whatever its stock.
   */
  private readonly joins = new Map<string, Learnt>();
  private telemetry?: PurchaseTelemetry;
  /**
   * Once the app closes, each answer closes its connection: from the start of the
   * shutdown (onModuleDestroy), while its hooks still wait for the work in hand, not
   * only once the HTTP server closes (create-app.ts), or a client would reuse a
   * connection that the close then ends under its next request.
   */
  draining = false;
  /** Answers given at the door, for /metrics and the tests. */
  answered = 0;

  constructor(private readonly clock: () => number = Date.now) {}

  /** The first of the shutdown's hooks (Nest calls them before beforeApplicationShutdown's). */
  onModuleDestroy(): void {
    this.draining = true;
  }

  /** Bodies over this are the framework's to refuse (413): set by create-app.ts. */
  private bodyLimit = 0;

  /**
   * Opens the door: the dashboard's and /metrics' counts of answers (the door's are
   * counted as the purchase route's are) and the body limit the framework enforces.
   */
  attach(telemetry: PurchaseTelemetry, bodyLimit: number): void {
    this.telemetry = telemetry;
    this.bodyLimit = bodyLimit;
  }

  /** Notes a refusal the purchase path got from Redis for `productId`. */
  learn(productId: string, err: AppError): void {
    const now = this.clock();
    if (err instanceof SoldOutError || err instanceof SaleEndedError) {
      const body = Buffer.from(JSON.stringify(errorBody(err)));
      this.learnt.set(productId, { until: now + DOOR_TRUST_MS, refusal: err, body });
    } else if (err instanceof SaleNotStartedError) {
      this.learnt.set(productId, {
        until: now + DOOR_TRUST_MS,
        refusal: null,
        startsAt: err.startsAtMs,
        offset: err.nowMs - now,
      });
    }
  }

  /** Notes that a join to `productId` was refused SOLD_OUT or SALE_ENDED by Redis (queue-5.lua). */
  learnJoin(productId: string, err: SoldOutError | SaleEndedError): void {
    const body = Buffer.from(JSON.stringify(errorBody(err)));
    this.joins.set(productId, { until: this.clock() + DOOR_TRUST_MS, refusal: err, body });
  }

  /** Forgets what the door knows of `productId` (its sale restarted here). */
  forget(productId: string): void {
    this.learnt.delete(productId);
    this.joins.delete(productId);
  }

  /**
   * Answers `req` at the door if its URL decides it, and says the route's pattern; null
   * to let the framework serve it. Called for every request the HTTP server receives,
   * so the common case (any other route) costs one comparison.
   */
  handle(req: IncomingMessage, res: ServerResponse): string | null {
    if (req.method !== 'POST' || (this.learnt.size === 0 && this.joins.size === 0)) return null;
    const match = PRODUCT_ROUTE.exec(req.url!);
    if (!match) return null;
    // A join is refused at the door only for what a join was told (queue-5.lua): a
    // sell-out or the sale's end. Never for the start: the herd joins before it.
    const joining = match[2] === 'queue';
    const learnt = joining ? this.joins : this.learnt;
    const known = learnt.get(match[1]);
    if (!known) return null;
    const headers = req.headers;
    if (headers['idempotency-key'] !== undefined || headers['admission-pass'] !== undefined) return null;
    // A request the route would refuse for its form (not JSON, too large) is left to
    // say so: the door answers only what the purchase itself would be answered.
    if (!headers['content-type']?.startsWith('application/json')) return null;
    if (Number(headers['content-length'] ?? Infinity) > this.bodyLimit) return null;
    const now = this.clock();
    if (now >= known.until) {
      learnt.delete(match[1]);
      return null;
    }
    let body = known.body;
    let retryAfter: string | undefined;
    let code: string;
    if (known.refusal) {
      code = known.refusal.code;
    } else {
      const redisNow = now + known.offset!;
      if (redisNow >= known.startsAt! - START_MARGIN_MS) return null;
      const err = new SaleNotStartedError(match[1], known.startsAt!, redisNow);
      body = Buffer.from(JSON.stringify(errorBody(err)));
      retryAfter = String(err.retryAfterS);
      code = err.code;
    }
    this.answered += 1;
    if (!joining) {
      // Counted as the purchase route counts its answers; a join is no purchase.
      this.telemetry?.arrived(match[1]);
      this.telemetry?.answered(match[1], code);
    }
    const head: Record<string, string | number> = { 'content-type': JSON_TYPE, 'content-length': body!.length };
    if (retryAfter !== undefined) head['retry-after'] = retryAfter;
    if (this.draining) head.connection = 'close';
    res.writeHead(409, head);
    res.end(body);
    return ROUTE_PATTERNS[joining ? 'queue' : 'orders'];
  }
}
