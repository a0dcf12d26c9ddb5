import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger, Optional } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ReplyError } from 'ioredis';
import { isRedisUnavailable, redisRefusal } from '../redis/redis-errors';
import { Metrics } from '../telemetry/metrics';
import { BurstLog } from './burst-log';
import {
  AppError,
  BadRequestError,
  FRAMEWORK_ERRORS,
  InternalError,
  OutcomeUnknownError,
  RedisUnavailableError,
  SaleNotStartedError,
  ValidationFailedError,
} from './errors';

/** Seconds a client should wait before retrying a 503. */
const RETRY_AFTER_S = '1';

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

/**
 * The answer an error gets, as ErrorFilter writes it: an AppError as it is, a
 * framework 4xx by its status, Redis out of reach as REDIS_UNAVAILABLE, anything
 * else INTERNAL_ERROR. Pure: the purchase route reads the code it will answer with
 * (for telemetry) before it rethrows, and the filter logs the unexpected ones.
 */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (err instanceof HttpException && err.getStatus() < 500) {
    const Known = FRAMEWORK_ERRORS[err.getStatus()] ?? BadRequestError;
    return new Known(err.message);
  }
  const refused = redisRefusal(err);
  if (refused) return refused;
  if (isRedisUnavailable(err)) return new RedisUnavailableError();
  return new InternalError();
}

/**
 * The one place errors become HTTP: every error body is {statusCode, code, message}
 * with a code from the table in errors.ts, and anything unexpected is a logged 500
 * that does not leak internals. Redis trouble, on any route, is counted by kind.
 */
@Catch()
export class ErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('ErrorFilter');
  /**
   * A failed batch answers up to MAX_BATCH buyers with one error, and a Redis that
   * refuses writes fails every buyer: one line per kind of trouble per 10 s, counted.
   */
  private readonly errors = new BurstLog((line) => this.logger.error(line));
  private readonly warnings = new BurstLog((line) => this.logger.warn(line));

  constructor(@Optional() private readonly metrics?: Metrics) {}

  catch(err: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const reply = http.getResponse<FastifyReply>();
    // The request's own stream failed while its body was read: its connection closed
    // (the client left, or the request timeout's 408 was answered on the socket and
    // closed it). Nobody is left to answer, and nothing of ours went wrong.
    if (err !== null && http.getRequest<FastifyRequest>().raw.errored === err) return;
    const known = toAppError(err);
    if (known instanceof InternalError && known !== err) {
      const message = err instanceof Error ? err.message : String(err);
      this.errors.say(`INTERNAL_ERROR ${message}`, err instanceof Error ? (err.stack ?? message) : message);
      if (err instanceof ReplyError) this.metrics?.redisError('reply');
    } else if (known !== err && redisRefusal(err)) {
      this.warnings.say(known.code, `Redis refused a command (${known.code}): ${(err as Error).message}`);
      this.metrics?.redisError('refused');
    } else if (known instanceof RedisUnavailableError) {
      this.metrics?.redisError('unavailable');
    } else if (known instanceof OutcomeUnknownError) {
      this.metrics?.redisError('outcome_unknown');
    }
    if (known.status === 503) void reply.header('Retry-After', RETRY_AFTER_S);
    else if (known.retryAfterS !== undefined) void reply.header('Retry-After', String(known.retryAfterS));
    void reply.status(known.status).send(errorBody(known));
  }
}
