import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';

/** Bodies a route's compiled JSON Schema accepted in full, for StrictValidationPipe to take as they are. */
const checked = new WeakSet<object>();

export function isSchemaChecked(body: unknown): body is object {
  return typeof body === 'object' && body !== null && checked.has(body);
}

/**
 * Fastify's ajv settings for route schemas: check, never change. Its defaults coerce
 * types ("2" would become 2), fill defaults and drop unknown fields, each of which
 * would let a body through that class-validator refuses.
 */
export const STRICT_AJV = {
  customOptions: { coerceTypes: false, useDefaults: false, removeAdditional: false, allErrors: false },
} as const;

/**
 * A route with a body schema (`@RouteSchema({ body })`) validates with the compiled
 * schema first. A body it accepts is marked, and the pipe takes it without running
 * class-validator: the hot path's whole validation is one compiled function. A body it
 * refuses is not answered by Fastify (attachValidation): it goes on to the pipe, where
 * class-validator refuses it with the same 400 body as on every other route.
 */
export function checkBodiesWithRouteSchemas(fastify: FastifyInstance): void {
  fastify.addHook('onRoute', (route) => {
    if (!route.schema?.body) return;
    route.attachValidation = true;
    const own =
      route.preHandler === undefined ? [] : Array.isArray(route.preHandler) ? route.preHandler : [route.preHandler];
    route.preHandler = [markChecked, ...own];
  });
}

function markChecked(request: FastifyRequest, _reply: FastifyReply, done: HookHandlerDoneFunction): void {
  if (request.validationError === undefined && typeof request.body === 'object' && request.body !== null) {
    checked.add(request.body);
  }
  done();
}
