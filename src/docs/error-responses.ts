import type { ResponseObject, SchemaObject } from '@nestjs/swagger';
import { ERROR_BODY_SCHEMA, errorBody } from '../errors/error-body';
import { ERROR_CODES } from '../errors/errors';
import { component } from './components';

/** Every error answer: ErrorFilter's body, and the fields' messages of a VALIDATION_FAILED. */
const ERROR_BODY = component('ErrorBody', {
  ...ERROR_BODY_SCHEMA,
  properties: {
    ...ERROR_BODY_SCHEMA.properties,
    errors: {
      type: 'array',
      description: 'VALIDATION_FAILED of a body or a parameter: each failing field and its first broken rule',
      items: {
        type: 'object',
        required: ['field', 'messages'],
        properties: { field: { type: 'string' }, messages: { type: 'array', items: { type: 'string' } } },
      },
    },
  },
});

/** ErrorFilter sends it with every 503. */
const RETRY_AFTER = {
  'Retry-After': { description: 'seconds to wait before retrying', schema: { type: 'integer' } },
};

/** With SALE_NOT_STARTED. */
const UNTIL_START = {
  'Retry-After': {
    description: 'with SALE_NOT_STARTED: seconds until the sale starts (rounded up)',
    schema: { type: 'integer' },
  },
};

/** The door sends them with every 429 (src/door/rate-limits.ts). */
const RATE_LIMIT_HEADERS = {
  ...RETRY_AFTER,
  'RateLimit-Policy': {
    description:
      'the limit that refused the request, draft-ietf-httpapi-ratelimit-headers-10: `"ip";q=<count>;w=<window seconds>` (or `"user"`)',
    schema: { type: 'string' },
  },
  RateLimit: {
    description: 'that limit now: `"ip";r=<requests left>;t=<seconds until the window resets>` (or `"user"`)',
    schema: { type: 'string' },
  },
};

/**
 * One response per HTTP status for `codes`: its codes named in the description and
 * as the enum of `code`, and each code's example body (its message from errors.ts).
 */
export function errorResponses(codes: readonly string[]): Record<string, ResponseObject> {
  const byStatus = new Map<number, string[]>();
  for (const code of new Set(codes)) {
    const declared = ERROR_CODES.get(code);
    if (!declared) throw new Error(`${code} is not declared in the error table (src/errors/errors.ts)`);
    byStatus.set(declared.status, [...(byStatus.get(declared.status) ?? []), code]);
  }
  const responses: Record<string, ResponseObject> = {};
  for (const [status, group] of [...byStatus].sort(([a], [b]) => a - b)) {
    const schema: SchemaObject = {
      allOf: [ERROR_BODY],
      properties: { statusCode: { type: 'integer', enum: [status] }, code: { type: 'string', enum: group } },
    };
    responses[status] = {
      description: group.map((code) => `\`${code}\``).join(', '),
      ...(status === 503
        ? { headers: RETRY_AFTER }
        : status === 429
          ? { headers: RATE_LIMIT_HEADERS }
          : group.includes('SALE_NOT_STARTED')
            ? { headers: UNTIL_START }
            : {}),
      content: {
        'application/json': {
          schema,
          examples: Object.fromEntries(group.map((code) => [code, { value: errorBody(exampleOf(code)) }])),
        },
      },
    };
  }
  return responses;
}

function exampleOf(code: string) {
  const example = ERROR_CODES.get(code)?.example?.();
  if (example?.code !== code)
    throw new Error(`no example answer for ${code} under its class in src/errors/ (example())`);
  return example;
}
