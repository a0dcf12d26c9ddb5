import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AnsweringHook, answerInHooks, HookFailure } from '../door/route-hooks';
import { ID_PATTERN } from '../sale/sale-limits';
import type { Checkout } from './checkout';
import type { CreateOrderDto, ProductOrderDto } from './dto/create-order.dto';
import type { ErrorBody } from '../errors/error-body';
import type { Order, OrderLine } from './order';

/** An order's status, on both routes (their @HttpCode) and from their hook alike. */
export const ORDER_CREATED = 201;

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * A purchase that its hook made and that failed or was refused other than 409: the
     * route (OrdersController) throws it, so Nest's filter answers it as any error, and
     * the purchase is not made twice.
     */
    purchaseFailure?: HookFailure;
  }
}

/**
 * The two purchase routes, each declared once: the order line its request asks for, or
 * nothing when the route's own pipes refuse the request (a body or a product id the
 * schema refused: the pipe answers 400 as on every route).
 */
const PURCHASE_ROUTES: Readonly<Record<string, (params: unknown, body: unknown) => OrderLine | undefined>> = {
  'POST /api/orders': (_params, body) => {
    const { productId, userId, quantity } = body as CreateOrderDto;
    return { productId, userId, quantity };
  },
  'POST /api/products/:id/orders': (params, body) => {
    const { id } = params as { id: string };
    if (!ID_PATTERN.test(id)) return undefined;
    const { userId, quantity } = body as ProductOrderDto;
    return { productId: id, userId, quantity };
  },
};

/** The purchase a route's request asks for, made by Checkout.buy() with the request's keys. */
function buy(checkout: Checkout, request: FastifyRequest, reply: FastifyReply, line: OrderLine) {
  const { headers } = request;
  return checkout.buy(line, headerOf(headers['idempotency-key']), headerOf(headers['admission-pass']), reply);
}

/**
 * When every buyer buys, a purchase is the app's whole work, and Nest's part of it
 * (its pipes, its parameter transforms, its promise chain, its answer through the
 * adapter) was a fifth of the app's CPU. So both purchase routes are answered from a
 * hook (answerInHooks): a 201 with the order, or a 409 refusal. Anything else goes on
 * to the route (OrdersController) unchanged: a request its pipes refuse, and any other
 * refusal or failure, which the route throws (purchaseLeftToTheRoute) so that Nest's
 * filter answers it (its code, its Retry-After, its metrics and logs).
 *
 * Called before app.init(), and after installDoorChecks(), whose hooks must run first.
 */
export function answerPurchasesInHooks(fastify: FastifyInstance, checkout: Checkout): void {
  // Declared on every request, so the hook's note does not change the request's shape.
  fastify.decorateRequest('purchaseFailure', undefined);
  const hooks: Record<string, AnsweringHook> = {};
  for (const [route, lineOf] of Object.entries(PURCHASE_ROUTES)) {
    hooks[route] = async (request, reply) => {
      if (request.validationError !== undefined) return;
      const line = lineOf(request.params, request.body);
      if (line === undefined) return;
      let body: Order | ErrorBody;
      try {
        body = await buy(checkout, request, reply, line);
      } catch (err) {
        request.purchaseFailure = { error: err };
        return;
      }
      // buy() sets 409 on the refusals it answers.
      return reply.code(reply.statusCode === 409 ? 409 : ORDER_CREATED).send(body);
    };
  }
  answerInHooks(fastify, 'the purchase', hooks);
}

/**
 * What a purchase route's handler does once its pipes passed: throw what the hook's
 * purchase failed with, for Nest's filter to answer. A request the hook left unmade
 * (none today: the pipes refuse what it leaves) is made here from what the pipes gave,
 * by the same declaration.
 */
export function purchaseLeftToTheRoute(
  checkout: Checkout,
  request: FastifyRequest,
  reply: FastifyReply,
  piped: { readonly params?: unknown; readonly body: unknown },
): Promise<Order | ErrorBody> {
  if (request.purchaseFailure !== undefined) throw request.purchaseFailure.error;
  const route = `${request.method} ${request.routeOptions.url}`;
  const line = PURCHASE_ROUTES[route]?.(piped.params, piped.body);
  // Only a route declared above, with params its pipe accepted, comes here.
  if (line === undefined) throw new Error(`${route}: no purchase is declared for these params`);
  return buy(checkout, request, reply, line);
}

/** A header as Nest's @Headers(name) gives it (Node joins a repeated one with ", "). */
function headerOf(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}
