import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/**
 * What a hook's work threw, kept for its route to throw. Wrapped, so that a rejection
 * with `undefined` still reads as a failure and the route never does the work again.
 */
export interface HookFailure {
  readonly error: unknown;
}

/** A hook that answers its route (and returns the reply), or returns nothing to let the route answer. */
export type AnsweringHook = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined>;

/**
 * Adds each hook as the last preHandler of its route, keyed `METHOD url` as Fastify
 * declares the route (Nest's `:id`; a GET's hook also serves its HEAD). A preHandler
 * runs once the body is parsed and checked by the route's compiled schema and the
 * door's checks (rate limits, buyer token) have passed; a hook that sends the answer
 * spares the request Nest's pipeline (its pipes, its parameter transforms, its promise
 * chain), and one that returns nothing leaves it to the route.
 *
 * Called before app.init(), when Nest registers its routes. A route renamed in its
 * controller would lose its hook without a word (and every answer would still be
 * right, only dearer), so the app refuses to start instead.
 */
export function answerInHooks(
  fastify: FastifyInstance,
  whose: string,
  hooks: Readonly<Record<string, AnsweringHook>>,
): void {
  const hooked = new Set<string>();
  fastify.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      const key = `${method === 'HEAD' ? 'GET' : method} ${route.url}`;
      const hook = hooks[key];
      if (hook === undefined) continue;
      route.preHandler = [...[route.preHandler ?? []].flat(), hook];
      hooked.add(key);
      return;
    }
  });
  fastify.addHook('onReady', async () => {
    for (const key of Object.keys(hooks)) {
      if (!hooked.has(key)) throw new Error(`${whose} route ${key} is not registered: its hook has nothing to answer`);
    }
  });
}
