import { AppError, SaleNotStartedError, ValidationFailedError } from './errors';

export interface ErrorBody {
  statusCode: number;
  code: string;
  message: string;
  errors?: unknown;
  /** SALE_NOT_STARTED: when the sale starts (ISO 8601). */
  startsAt?: string;
}

/**
 * ErrorBody without `errors`, for the routes that compile a serializer for an error
 * status (never 400, whose body lists the fields). Properties in errorBody()'s order,
 * so the bytes are those JSON.stringify writes.
 */
export const ERROR_BODY_SCHEMA = {
  type: 'object',
  required: ['statusCode', 'code', 'message'],
  properties: {
    statusCode: { type: 'integer' },
    code: { type: 'string' },
    message: { type: 'string' },
    startsAt: { type: 'string' },
  },
} as const;

/** The body every error answer has: {statusCode, code, message} (and the fields, for a validation error). */
export function errorBody(err: AppError): ErrorBody {
  const body: ErrorBody = { statusCode: err.status, code: err.code, message: err.message };
  if (err instanceof ValidationFailedError) body.errors = err.errors;
  if (err instanceof SaleNotStartedError) body.startsAt = err.startsAt;
  return body;
}
