import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { answerInHooks, HookFailure } from '../door/route-hooks';
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
 * When every buyer buys, a purchase is the app's whole work, and Nest's part of it
 * (its pipes, its parameter transforms, its promise chain, its answer through the
 * adapter) was a fifth of the app's CPU. So both purchase routes are answered from a
 * hook (answerInHooks), by the same Checkout.buy() as the routes: a 201 with the order,
 * or a 409 refusal. Anything else goes on to the route unchanged: a body or a product
 * id the schema refused (the pipe answers 400 as on every route), and any other
 * refusal or failure, which the route throws so that Nest's filter answers it (its
 * code, its Retry-After, its metrics and logs).
 *
 * Called before app.init(), and after installDoorChecks(), whose hooks must run first.
 */
export function answerPurchasesInHooks(fastify: FastifyInstance, checkout: Checkout): void {
  const answer = async (request: FastifyRequest, reply: FastifyReply, line: OrderLine) => {
    const { headers } = request;
    let body: Order | ErrorBody;
    try {
      body = await checkout.buy(line, headerOf(headers['idempotency-key']), headerOf(headers['admission-pass']), reply);
    } catch (err) {
      request.purchaseFailure = { error: err };
      return;
    }
    // buy() sets 409 on the refusals it answers.
    return reply.code(reply.statusCode === 409 ? 409 : ORDER_CREATED).send(body);
  };
  // Declared on every request, so the hook's note does not change the request's shape.
  fastify.decorateRequest('purchaseFailure', undefined);
  answerInHooks(fastify, 'the purchase', {
    'POST /api/orders': async (request, reply) => {
      if (request.validationError !== undefined) return;
      const { productId, userId, quantity } = request.body as CreateOrderDto;
      return answer(request, reply, { productId, userId, quantity });
    },
    'POST /api/products/:id/orders': async (request, reply) => {
      if (request.validationError !== undefined) return;
      const { id } = request.params as { id: string };
      if (!ID_PATTERN.test(id)) return;
      const { userId, quantity } = request.body as ProductOrderDto;
      return answer(request, reply, { productId: id, userId, quantity });
    },
  });
}

/** A header as Nest's @Headers(name) gives it (Node joins a repeated one with ", "). */
function headerOf(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}
