/**
 * The routes a buyer comes through: purchases, queue joins and ticket reads, and the
 * buyer's own order (read, cancel). Rate
 * limits and buyer tokens apply to these and nothing else (not the admin route, the
 * probes, /metrics or the dashboard). Written as `METHOD /path` with every path
 * parameter as `:`, so a route is matched whatever its parameters are named; a route
 * added under one of these paths is covered by adding its line here.
 */
export const DOOR_ROUTES: readonly string[] = [
  'POST /api/orders',
  'POST /api/products/:/orders',
  'POST /api/products/:/queue',
  'GET /api/products/:/queue/:',
  // The buyer's own orders (under BUYER_AUTH only theirs: order-outcomes.controller.ts);
  // not /pay, the payment provider's callback, which is no buyer's.
  'GET /api/orders/:',
  'POST /api/orders/:/cancel',
];

/** The codes the door can answer on each of DOOR_ROUTES: `@ApiErrors(...DOOR_ERRORS, ...)` on the route. */
export const DOOR_ERRORS: readonly string[] = [
  'RATE_LIMITED',
  'BUYER_TOKEN_REQUIRED',
  'BUYER_TOKEN_INVALID',
  'BUYER_TOKEN_EXPIRED',
  'USER_MISMATCH',
  'BUYER_KEYS_UNAVAILABLE',
  // The limit's count is a Redis write: Redis's refusals of a write answer as on any route.
  'REDIS_UNAVAILABLE',
  'REDIS_OUT_OF_MEMORY',
  'REDIS_READ_ONLY',
  'REDIS_NO_PERMISSION',
];

/** Whether Fastify's route `url` for `method` is one of DOOR_ROUTES (HEAD goes with GET). */
export function isDoorRoute(method: string, url: string): boolean {
  const path = url.replace(/:[^/]+/g, ':');
  const as = method === 'HEAD' ? 'GET' : method;
  return DOOR_ROUTES.includes(`${as} ${path}`);
}
