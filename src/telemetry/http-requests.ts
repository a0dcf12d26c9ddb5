import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/** One HTTP request, from the moment Node hands it over. */
export interface RequestContext {
  /** Its X-Request-Id: ours, or a trusted proxy's. */
  readonly id: string;
  /** performance.now() when Node emitted it (its headers read); 0 when nothing times requests. */
  readonly startedAt: number;
  /**
   * Its answer was handed to Node. A timer or a loop the request's work started (a live
   * stream's poll, a burst's count) carries its context on: their lines are no longer its.
   */
  answered: boolean;
}

/** The request whose work is running, for the log lines it writes (logMixin). */
export const requestContext = new AsyncLocalStorage<RequestContext>();

/** What every log line gets: `reqId`, while it is written for a request not yet answered. */
export function logMixin(): { reqId?: string } {
  const context = requestContext.getStore();
  // A new object each time: pino merges the line's own fields into it.
  return context !== undefined && !context.answered ? { reqId: context.id } : {};
}

/** The route label of an answer no route gave: a path nobody serves, a URL the router refused. */
export const UNMATCHED_ROUTE = 'unmatched';

/** An id a proxy sends: short, and nothing a log line or a header would need escaped. */
const GIVEN_ID = /^[A-Za-z0-9._:/+=@-]{1,128}$/;
/** The counter stays a small integer (V8's SMI): at the top, a new prefix starts a new series. */
const MAX_COUNT = 0x7fffffff;
const CONTEXT = Symbol('seckill.request');

type Tracked = IncomingMessage & { [CONTEXT]?: RequestContext };

/** The context `received` gave `req`; undefined for a request that never came through the server (Fastify's inject). */
export function contextOf(req: IncomingMessage): RequestContext | undefined {
  return (req as Tracked)[CONTEXT];
}

/** How an answer is timed: seckill_http_request_duration_seconds (Metrics.httpAnswered). */
export type AnswerObserver = (method: string, route: string, status: number, seconds: number) => void;

/**
 * What the app keeps of each HTTP request: an id, on the answer (X-Request-Id) and on
 * every line its work logs, and, with TELEMETRY, its duration by route and status. Per
 * request: a string, a small object, a header, an AsyncLocalStorage run (requestContext),
 * and with TELEMETRY a clock read and one histogram observation (about 0.5 µs in all);
 * no listener, no logger.
 *
 * An id is this process's random prefix and a counter (unique across instances and
 * restarts without a random draw per request). A proxy's X-Request-Id is taken instead
 * when TRUST_PROXY trusts the socket's peer and the id is a plain token of at most 128
 * characters: the id a proxy logged then finds the app's lines. From anyone else it is
 * ignored, or a client could write what it likes into the log.
 */
export class HttpRequests {
  private prefix = newPrefix();
  private count = 0;
  private observe: AnswerObserver | null = null;

  constructor(private readonly trustsPeer: ((address: string) => boolean) | null) {}

  /** Times every answer from now on (create-app.ts, once Nest has made the metrics). */
  timeWith(observe: AnswerObserver): void {
    this.observe = observe;
  }

  /** A new id: for a request, or for an answer to bytes that never became one (client-error.ts). */
  newId(): string {
    if (this.count === MAX_COUNT) {
      this.prefix = newPrefix();
      this.count = 0;
    }
    return `${this.prefix}-${(++this.count).toString(36)}`;
  }

  /** Called first for every request: its context, its X-Request-Id already on the answer. */
  received(req: IncomingMessage, res: ServerResponse): RequestContext {
    const given = this.trustsPeer && req.headers['x-request-id'];
    const id =
      typeof given === 'string' && GIVEN_ID.test(given) && this.trustsPeer!(req.socket.remoteAddress ?? '')
        ? given
        : this.newId();
    // Node merges it into whatever writes the head: Fastify, the door, the shutdown's 503.
    res.setHeader('x-request-id', id);
    const context: RequestContext = { id, startedAt: this.observe ? performance.now() : 0, answered: false };
    (req as Tracked)[CONTEXT] = context;
    return context;
  }

  /** `req` is answered `status` by `route` (its pattern, never the URL: a label per URL would be unbounded). */
  answered(req: IncomingMessage, route: string, status: number): void {
    const context = contextOf(req);
    if (context === undefined || context.answered) return;
    context.answered = true;
    this.observe?.(methodLabel(req.method), route, status, (performance.now() - context.startedAt) / 1000);
  }
}

/** The methods an API is asked with; any other of Node's 34 is one label, so a client cannot make series. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']);

function methodLabel(method: string | undefined): string {
  return method !== undefined && METHODS.has(method) ? method : 'other';
}

function newPrefix(): string {
  return randomBytes(6).toString('base64url');
}
