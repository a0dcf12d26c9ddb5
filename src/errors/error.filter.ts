import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { isRedisUnavailable } from '../redis/redis-errors';
import { DomainError } from './domain-errors';

const DOMAIN_STATUS: Readonly<Record<string, number>> = {
  UNKNOWN_PRODUCT: HttpStatus.NOT_FOUND,
  SOLD_OUT: HttpStatus.CONFLICT,
  INSUFFICIENT_STOCK: HttpStatus.CONFLICT,
  LIMIT_REACHED: HttpStatus.CONFLICT,
  UNAUTHORIZED: HttpStatus.UNAUTHORIZED,
  LOCK_TIMEOUT: HttpStatus.SERVICE_UNAVAILABLE,
  STALE_LOCK: HttpStatus.SERVICE_UNAVAILABLE,
  REDIS_UNAVAILABLE: HttpStatus.SERVICE_UNAVAILABLE,
};

/** Codes for errors raised by Nest or Fastify before our code runs (routing, body parsing). */
const HTTP_CODES: Readonly<Record<number, string>> = {
  400: 'VALIDATION_FAILED',
  401: 'UNAUTHORIZED',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_ALLOWED',
  406: 'NOT_ACCEPTABLE',
  408: 'REQUEST_TIMEOUT',
  411: 'LENGTH_REQUIRED',
  413: 'PAYLOAD_TOO_LARGE',
  414: 'URI_TOO_LONG',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  431: 'HEADERS_TOO_LARGE',
};

/** Seconds a client should wait before retrying a 503. */
const RETRY_AFTER_S = '1';

export interface ErrorBody {
  statusCode: number;
  code: string;
  message: string;
  errors?: unknown;
}

/**
 * The one place errors become HTTP: every error body is {statusCode, code, message}
 * with a stable upper-snake code, and anything unexpected is a logged 500 that does
 * not leak internals.
 */
@Catch()
export class ErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('ErrorFilter');

  catch(err: unknown, host: ArgumentsHost): void {
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    const body = this.toBody(err);
    if (body.statusCode === HttpStatus.SERVICE_UNAVAILABLE) reply.header('Retry-After', RETRY_AFTER_S);
    void reply.status(body.statusCode).send(body);
  }

  private toBody(err: unknown): ErrorBody {
    if (err instanceof DomainError) {
      return { statusCode: DOMAIN_STATUS[err.code] ?? 500, code: err.code, message: err.message };
    }
    if (err instanceof HttpException) {
      const statusCode = err.getStatus();
      const response = err.getResponse();
      // Our ValidationPipe factory puts {code, message, errors} in the response.
      if (typeof response === 'object' && response !== null && 'code' in response) {
        return { statusCode, ...(response as Omit<ErrorBody, 'statusCode'>) };
      }
      const code = HTTP_CODES[statusCode] ?? (statusCode < 500 ? 'BAD_REQUEST' : 'INTERNAL_ERROR');
      return { statusCode, code, message: err.message };
    }
    if (isRedisUnavailable(err)) {
      return {
        statusCode: HttpStatus.SERVICE_UNAVAILABLE,
        code: 'REDIS_UNAVAILABLE',
        message: 'Redis is not reachable; retry later',
      };
    }
    this.logger.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    return { statusCode: 500, code: 'INTERNAL_ERROR', message: 'internal error' };
  }
}
