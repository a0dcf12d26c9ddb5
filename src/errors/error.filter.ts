import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { isRedisUnavailable } from '../redis/redis-errors';
import {
  AppError,
  BadRequestError,
  FRAMEWORK_ERRORS,
  InternalError,
  RedisUnavailableError,
  ValidationFailedError,
} from './errors';

/** Seconds a client should wait before retrying a 503. */
const RETRY_AFTER_S = '1';

export interface ErrorBody {
  statusCode: number;
  code: string;
  message: string;
  errors?: unknown;
}

/**
 * ErrorBody without `errors`, for the routes that compile a serializer for an error
 * status (never 400, whose body lists the fields). Properties in errorBody()'s order,
 * so the bytes are those JSON.stringify writes.
 */
export const ERROR_BODY_SCHEMA = {
  type: 'object',
  required: ['statusCode', 'code', 'message'],
  properties: { statusCode: { type: 'integer' }, code: { type: 'string' }, message: { type: 'string' } },
} as const;

/** The body every error answer has: {statusCode, code, message} (and the fields, for a validation error). */
export function errorBody(err: AppError): ErrorBody {
  const body: ErrorBody = { statusCode: err.status, code: err.code, message: err.message };
  if (err instanceof ValidationFailedError && err.errors) body.errors = err.errors;
  return body;
}

/**
 * The one place errors become HTTP: every error body is {statusCode, code, message}
 * with a code from the table in errors.ts, and anything unexpected is a logged 500
 * that does not leak internals.
 */
@Catch()
export class ErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('ErrorFilter');

  catch(err: unknown, host: ArgumentsHost): void {
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    const known = this.toAppError(err);
    if (known.status === 503) void reply.header('Retry-After', RETRY_AFTER_S);
    void reply.status(known.status).send(errorBody(known));
  }

  private toAppError(err: unknown): AppError {
    if (err instanceof AppError) return err;
    if (err instanceof HttpException && err.getStatus() < 500) {
      const Known = FRAMEWORK_ERRORS[err.getStatus()] ?? BadRequestError;
      return new Known(err.message);
    }
    if (isRedisUnavailable(err)) return new RedisUnavailableError();
    this.logger.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    return new InternalError();
  }
}
