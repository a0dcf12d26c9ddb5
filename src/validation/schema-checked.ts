import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { dtoOf } from './json-schema';

/**
 * Fastify's ajv settings for route schemas: check, never change. Its defaults coerce
 * types ("2" would become 2), fill defaults and drop unknown fields, each of which
 * would let a body through that class-validator refuses; and ajv compiles a `pattern`
 * with the `u` flag, under which `.{1,2}` takes two emoji that class-validator's RegExp
 * (no flag) counts as four characters.
 */
export const STRICT_AJV = {
  customOptions: {
    coerceTypes: false,
    useDefaults: false,
    removeAdditional: false,
    allErrors: false,
    unicodeRegExp: false,
  },
} as const;

/**
 * True for a body that a route's compiled schema accepted: only checkBodiesWithRouteSchemas
 * makes DTO instances of bodies (a JSON parser makes plain objects, and Fastify refuses
 * `__proto__` keys), so an instance of the DTO the pipe expects is one the schema took.
 */
export function isSchemaChecked(body: unknown, dto: unknown): boolean {
  return typeof dto === 'function' && dto !== Object && body instanceof dto;
}

/**
 * A route with a body schema derived from a DTO (`@RouteSchema({ body: bodySchemaOf(Dto) })`)
 * validates with the compiled schema first. A body it accepts becomes an instance of the
 * DTO (defaults applied), which the pipe takes without running class-validator: the hot
 * path's whole validation is one compiled function. A body it refuses is not answered by
 * Fastify (attachValidation): it goes on to the pipe as it came, where class-validator
 * refuses it with the same 400 body as on every other route.
 */
export function checkBodiesWithRouteSchemas(fastify: FastifyInstance): void {
  fastify.addHook('onRoute', (route) => {
    const Dto = dtoOf(route.schema?.body);
    if (!Dto) return;
    route.attachValidation = true;
    const asDto = (request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void => {
      if (request.validationError === undefined) request.body = Object.assign(new Dto(), request.body);
      done();
    };
    const own =
      route.preHandler === undefined ? [] : Array.isArray(route.preHandler) ? route.preHandler : [route.preHandler];
    route.preHandler = [asDto, ...own];
  });
}
