import { Body, Controller, HttpCode, Param, Post, Req, Res } from '@nestjs/common';
import { RouteSchema } from '@nestjs/platform-fastify';
import { ApiCreatedResponse, ApiHeader, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiErrors } from '../docs/api-errors';
import { DOOR_ERRORS } from '../door/door-routes';
import { AnsweringHook, answerInHooks, HookFailure } from '../door/route-hooks';
import { component } from '../docs/components';
import { ApiJsonBody, ApiPathParams } from '../docs/dto-decorators';
import { ProductParamsDto } from '../sale/product-params.dto';
import { ID_PATTERN } from '../sale/sale-limits';
import type { ErrorBody } from '../errors/error-body';
import { Checkout } from './checkout';
import { CreateOrderDto, ProductOrderDto } from './dto/create-order.dto';
import { CREATE_ORDER_ROUTE_SCHEMA, ORDER_SCHEMA, PRODUCT_ORDER_ROUTE_SCHEMA } from './dto/create-order.schema';
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

/** What both purchase routes answer, besides the order: the door's refusals first. */
const PURCHASE_ERRORS = [
  ...DOOR_ERRORS,
  'VALIDATION_FAILED',
  'PAYLOAD_TOO_LARGE',
  'UNSUPPORTED_MEDIA_TYPE',
  'UNKNOWN_PRODUCT',
  'SALE_NOT_STARTED',
  'SALE_ENDED',
  'ADMISSION_REQUIRED',
  'ADMISSION_INVALID',
  'SOLD_OUT',
  'INSUFFICIENT_STOCK',
  'LIMIT_REACHED',
  'IDEMPOTENCY_KEY_IN_USE',
  'IDEMPOTENCY_KEY_MISMATCH',
  'LOCK_TIMEOUT',
  'LOCK_EXPIRED',
  'STALE_LOCK',
  'LOCK_BYPASSED',
  'CONTENTION',
  'BUCKETS_BUSY',
  'LOCK_NODES_UNAVAILABLE',
  'STRATEGY_MISMATCH',
  'REDIS_UNAVAILABLE',
  'REDIS_OUT_OF_MEMORY',
  'REDIS_PERSISTENCE_FAILED',
  'REDIS_NOT_ENOUGH_REPLICAS',
  'REDIS_READ_ONLY',
  'REDIS_NO_PERMISSION',
  'OUTCOME_UNKNOWN',
];

/** What the door (src/door) answers before the route, on both purchase routes. */
const DOOR_FIRST =
  'The door answers first, before the body is read: over RATE_LIMIT_PER_IP or RATE_LIMIT_PER_USER, 429 ' +
  '`RATE_LIMITED` (with `Retry-After`, `RateLimit-Policy`, `RateLimit`). With BUYER_AUTH set, the request ' +
  'needs `Authorization: Bearer <JWT>` from the configured issuer, and `userId` must be its `sub` ' +
  '(401 `BUYER_TOKEN_REQUIRED`, `BUYER_TOKEN_INVALID`, `BUYER_TOKEN_EXPIRED`; 403 `USER_MISMATCH`).';

const IDEMPOTENCY_KEY_HEADER = ApiHeader({
  name: 'Idempotency-Key',
  required: false,
  description:
    'makes a retry safe: 1 to 255 visible ASCII characters other than `"` and `\\`, bare or quoted; scoped to the product. With an Admission-Pass the pass is the key, and this header is not used',
  schema: { type: 'string' },
});

const ADMISSION_PASS_HEADER = ApiHeader({
  name: 'Admission-Pass',
  required: false,
  description:
    'required for a product with a waiting room: the pass its queue gave this user (GET /api/products/:id/queue/:ticket). It buys once: a retry with it is answered the same order (`Idempotent-Replayed: true`)',
  schema: { type: 'string' },
});

const CREATED_ORDER = ApiCreatedResponse({
  description:
    'the order; a retry with the same Idempotency-Key (or Admission-Pass) and body answers the same order again',
  schema: component('Order', ORDER_SCHEMA),
  headers: {
    'Idempotent-Replayed': {
      description: "`true` when this answer is a retry's: the order was placed earlier, nothing was written now",
      schema: { type: 'string', enum: ['true'] },
    },
  },
});

/**
 * The two purchase routes: their paths, schemas and OpenAPI, and the answers their hook
 * (answerPurchasesInHooks, above, from each route's one declaration) leaves to Nest.
 */
@ApiTags('orders')
@Controller('api')
export class OrdersController {
  constructor(private readonly checkout: Checkout) {}

  /**
   * 201 with the order; 409 SOLD_OUT / INSUFFICIENT_STOCK / LIMIT_REACHED; 404
   * UNKNOWN_PRODUCT; 503 (see errors.ts). With an Idempotency-Key: a retry gets the
   * first answer's order again (`Idempotent-Replayed: true`), 409 while the first is
   * in flight, 422 for the key with another body. With REDIS_WAIT_REPLICAS, a 201 only
   * once that many replicas have the order (ReplicaAcks).
   */
  @Post('orders')
  @HttpCode(ORDER_CREATED)
  @RouteSchema(CREATE_ORDER_ROUTE_SCHEMA)
  @ApiOperation({ summary: 'buy: one order of quantity units of a product for a user', description: DOOR_FIRST })
  @ApiJsonBody(CreateOrderDto)
  @IDEMPOTENCY_KEY_HEADER
  @ADMISSION_PASS_HEADER
  @CREATED_ORDER
  @ApiErrors(...PURCHASE_ERRORS)
  create(
    // The pipe words a body the route's schema refused; the purchase itself is
    // declared once, in PURCHASE_ROUTES above, whose hook answers an order or a 409.
    @Body() body: CreateOrderDto,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Order | ErrorBody> {
    return purchaseLeftToTheRoute(this.checkout, request, reply, { body });
  }

  /**
   * The same purchase with the product in the URL: a refusal that the URL alone decides
   * (sold out, not started, ended) is answered at the door, before the body is read
   * (src/door/door-refusals.ts).
   */
  @Post('products/:id/orders')
  @HttpCode(ORDER_CREATED)
  @RouteSchema(PRODUCT_ORDER_ROUTE_SCHEMA)
  @ApiOperation({
    summary: 'buy, the product in the URL: refusals the URL decides cost almost nothing',
    description:
      'A refusal Redis gave this product in the last 250 ms that the URL alone decides (`SOLD_OUT`, ' +
      '`SALE_NOT_STARTED` more than 250 ms before the start, `SALE_ENDED`) is answered before anything else, ' +
      'for a JSON body within the limit and without Idempotency-Key or Admission-Pass. ' +
      DOOR_FIRST,
  })
  @ApiPathParams(ProductParamsDto)
  @ApiJsonBody(ProductOrderDto)
  @IDEMPOTENCY_KEY_HEADER
  @ADMISSION_PASS_HEADER
  @CREATED_ORDER
  @ApiErrors('URI_TOO_LONG', ...PURCHASE_ERRORS)
  createForProduct(
    @Param() params: ProductParamsDto,
    @Body() body: ProductOrderDto,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<Order | ErrorBody> {
    return purchaseLeftToTheRoute(this.checkout, request, reply, { params, body });
  }
}
