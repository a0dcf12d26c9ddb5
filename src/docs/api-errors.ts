import { ApiExtension } from '@nestjs/swagger';
import { ERROR_CODES } from '../errors/errors';

/**
 * What any request can be answered before or beside its route's own outcome: not
 * valid HTTP (or a 4xx the framework raises that the table does not name), too slow to
 * arrive, headers over Node's limit, a bug. The document adds them to every operation.
 */
export const EVERY_ROUTE_ERRORS: readonly string[] = [
  'BAD_REQUEST',
  'REQUEST_TIMEOUT',
  'HEADERS_TOO_LARGE',
  'INTERNAL_ERROR',
];

/** Where ApiErrors leaves a route's codes in its operation, for openapi.ts to turn into responses. */
export const ERROR_CODES_EXTENSION = 'x-error-codes';

/**
 * The error codes a route answers besides EVERY_ROUTE_ERRORS: the one declaration the
 * OpenAPI responses (one per status, each code with an example body) are made from.
 * An unknown code stops the app at start-up.
 */
export function ApiErrors(...codes: string[]): MethodDecorator {
  const unknown = codes.filter((code) => !ERROR_CODES.has(code));
  if (unknown.length > 0) throw new Error(`ApiErrors: ${unknown.join(', ')} is not declared in src/errors/errors.ts`);
  return ApiExtension(ERROR_CODES_EXTENSION, [...new Set(codes)]);
}
