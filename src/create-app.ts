import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Logger } from 'nestjs-pino';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { AppModule } from './app.module';
import { DoorRefusals } from './door/door-refusals';
import { PurchaseTelemetry } from './telemetry/purchase-telemetry';
import { AppConfig } from './config/app-config';
import { setupOpenApi } from './docs/openapi';
import { isDoorRoute } from './door/door-routes';
import { PAYMENT_SIGNATURE_SCHEME } from './door/payment-signature';
import { installDoorChecks } from './door/door-checks';
import { answerQueueInHooks } from './door/queue-hooks';
import { Checkout } from './orders/checkout';
import { answerPurchasesInHooks } from './orders/orders.controller';
import { WaitingRoom } from './door/waiting-room';
import { REDIS_CLIENT } from './redis/redis.constants';
import { Metrics } from './telemetry/metrics';
import { clientErrorHandler, routerRefusal } from './http/client-error';
import { errorBody } from './errors/error-body';
import { checkBodiesWithRouteSchemas, STRICT_AJV } from './validation/schema-checked';
import { contextOf, HttpRequests, requestContext, UNMATCHED_ROUTE } from './telemetry/http-requests';
import { fastifyTrustProxy, proxyTrust } from './trusted-proxy';

/** Bodies larger than this are refused with 413 before they are parsed. */
export const BODY_LIMIT_BYTES = 16 * 1024;

/**
 * The router answers a longer path parameter 414 URI_TOO_LONG, and the answer names it.
 * Above every id the routes accept, the longest an order id (`<productId>.<uuid>`: 64 +
 * 1 + 36 = 101 characters; Fastify's default of 100 refused it): a longer one that is
 * still under this is told its rule by validation.
 */
const MAX_PARAM_LENGTH = 128;

/** Node 24's AsyncLocalStorage (AsyncContextFrame) follows promises at no measurable cost. */
const CONTEXT_IS_CHEAP = Number(process.versions.node.split('.')[0]) >= 24;

/**
 * How often Node looks for requests past REQUEST_TIMEOUT_MS (its default is 30 s, which
 * would let a 10 s timeout run to 40 s). The check walks only connections whose request
 * is still arriving.
 */
const REQUEST_TIMEOUT_CHECK_MS = 1_000;

/**
 * Builds the app exactly as main.ts runs it, so tests exercise the real HTTP
 * stack: Fastify limits, content-type handling, pipes and filters.
 */
export async function createApp(config: AppConfig, options: { logger?: false } = {}): Promise<NestFastifyApplication> {
  // Only a proxy TRUST_PROXY trusts may name the request (X-Request-Id).
  const trust = config.trustProxy === false ? null : proxyTrust(config.trustProxy);
  const requests = new HttpRequests(trust && ((address: string) => trust(address, 0)));
  // A request that arrives on an open connection while we drain is served, not
  // answered with Fastify's bare 503 (which has no `code`).
  const adapter = new FastifyAdapter({
    bodyLimit: BODY_LIMIT_BYTES,
    return503OnClosing: false,
    ajv: STRICT_AJV,
    // A client that sends headers and half a body would otherwise hold its socket
    // forever: Fastify turns Node's request timeout off by default. Past it, Node raises
    // ERR_HTTP_REQUEST_TIMEOUT and clientErrorHandler answers 408. The headers get the
    // same deadline: Node swaps the two when headersTimeout (60 s by default) is the
    // larger, which would quietly stretch a 10 s request timeout to 60 s.
    requestTimeout: config.requestTimeoutMs,
    http: {
      requestTimeout: config.requestTimeoutMs,
      headersTimeout: config.requestTimeoutMs,
      connectionsCheckingInterval: REQUEST_TIMEOUT_CHECK_MS,
    },
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Fastify refuses some URLs before Nest sees the request: the same body shape as
    // every other error. No route answered, so none of the hooks runs: timed here.
    frameworkErrors: (
      error: Error & { code?: string; statusCode?: number },
      request: FastifyRequest,
      reply: FastifyReply,
    ) => {
      const known = routerRefusal(error, MAX_PARAM_LENGTH);
      requests.answered(request.raw, UNMATCHED_ROUTE, known.status);
      void reply.status(known.status).send(errorBody(known));
    },
    clientErrorHandler: clientErrorHandler(
      config.requestTimeoutMs,
      (req) => (req && contextOf(req)?.id) ?? requests.newId(),
    ),
    // Fastify's request.id is the request's X-Request-Id (inject() bypasses the server).
    genReqId: (req: IncomingMessage) => contextOf(req)?.id ?? requests.newId(),
    // Who the client is (request.ip) behind the proxies TRUST_PROXY names, by the same
    // rule as the request id. The adapter's overloaded options type cannot infer a union
    // of Fastify's forms, hence the cast to one.
    trustProxy: fastifyTrustProxy(config.trustProxy) as boolean,
  });
  const fastify = adapter.getInstance();
  // The door (src/door/door-refusals.ts) answers on the server's request event, before
  // Fastify's own handler (the server's one listener) parses or routes anything; it
  // exists once Nest has made it, and until then every request goes on. (Not Fastify's
  // serverFactory: with one, Fastify binds only one address of a host name.)
  const door: { refusals?: DoorRefusals } = {};
  const [fastifyHandler, ...others] = fastify.server.listeners('request') as RequestListener[];
  if (!fastifyHandler || others.length > 0)
    throw new Error("the HTTP server's request listener is not Fastify's alone");
  fastify.server.removeAllListeners('request');
  const serve = (req: IncomingMessage, res: ServerResponse) => {
    const route = door.refusals?.handle(req, res);
    if (route) requests.answered(req, route, res.statusCode);
    else fastifyHandler(req, res);
  };
  // Each request's work runs in its context, so the lines it logs carry its id (Fastify
  // carries the context on past the body, which Node emits from the socket). Only on
  // Node 24+, whose AsyncLocalStorage costs nothing measurable; on 22 it tracks every
  // promise through async hooks (10-15% of a Nest route's throughput, measured): there
  // the answers carry X-Request-Id and the lines carry none.
  fastify.server.on(
    'request',
    CONTEXT_IS_CHEAP
      ? (req: IncomingMessage, res: ServerResponse) => requestContext.run(requests.received(req, res), serve, req, res)
      : (req: IncomingMessage, res: ServerResponse) => {
          requests.received(req, res);
          serve(req, res);
        },
  );
  // Before Nest registers its routes, which is when the hook sees them.
  checkBodiesWithRouteSchemas(fastify);
  // Only JSON bodies: Fastify would otherwise parse text/plain into a string and
  // hand it to validation; refusing it up front gives a clear 415.
  fastify.removeContentTypeParser('text/plain');
  // A payment callback is signed over the bytes sent (src/door/payment-signature.ts): the
  // JSON parser keeps them beside what it parses, with Fastify's own parser and limits.
  const parseJson = fastify.getDefaultJsonParser('error', 'error');
  fastify.removeContentTypeParser('application/json');
  fastify.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    request.rawBody = body as string;
    void parseJson(request, body as string, done);
  });
  // Graceful drain: close() stops accepting and reaps idle keep-alive sockets once,
  // but a socket whose request was in flight would then idle on for the keep-alive
  // timeout (72 s) and hold shutdown open. Once closing, every response says
  // `Connection: close`, so each socket ends with its last answer.
  let draining = false;
  fastify.addHook('preClose', (done) => {
    draining = true;
    if (door.refusals) door.refusals.draining = true;
    done();
  });
  fastify.addHook('onSend', (request, reply, payload, done) => {
    // From the start of the app's shutdown (DoorRefusals.onModuleDestroy), or the server's close.
    if (draining || door.refusals?.draining) void reply.header('connection', 'close');
    // Every answer Fastify gives passes here: a route's (by its pattern), the 404 of a
    // path no route serves, an error's, a purchase answered from its hook.
    requests.answered(request.raw, request.routeOptions.url ?? UNMATCHED_ROUTE, reply.statusCode);
    done(null, payload);
  });
  const logged = options.logger !== false;
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config), adapter, {
    // Nest's own start-up lines wait until the pino logger exists, then go through it
    // (and its LOG_LEVEL) like every other line.
    ...(logged ? { bufferLogs: true } : { logger: false }),
    // No urlencoded parser: Fastify's own JSON parser is the only one registered.
    bodyParser: false,
  });
  if (logged) app.useLogger(app.get(Logger));
  const metrics = app.get(Metrics);
  if (metrics.enabled) requests.timeWith((...answer) => metrics.httpAnswered(...answer));
  const refusals = app.get(DoorRefusals);
  refusals.attach(app.get(PurchaseTelemetry), BODY_LIMIT_BYTES);
  door.refusals = refusals;
  // Rate limits and buyer tokens on the purchase routes, in Fastify hooks (src/door).
  await installDoorChecks(fastify, config, app.get(REDIS_CLIENT), metrics);
  // The waiting room's joins and ticket reads, answered from the hook after those checks.
  answerQueueInHooks(fastify, app.get(WaitingRoom), refusals);
  // And the purchases, on both routes (src/orders/orders.controller.ts).
  answerPurchasesInHooks(fastify, app.get(Checkout));
  setupOpenApi(app, {
    buyerAuth: config.buyerAuth,
    isBuyerRoute: isDoorRoute,
    paymentScheme: PAYMENT_SIGNATURE_SCHEME,
  });
  await app.init();
  return app;
}
