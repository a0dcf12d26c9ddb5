import { ArgumentsHost, Catch, ExceptionFilter, Logger, Optional } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ReplyError } from 'ioredis';
import { BurstLog } from '../errors/burst-log';
import { errorBody } from '../errors/error-body';
import { InternalError, OutcomeUnknownError, RedisUnavailableError } from '../errors/errors';
import { redisRefusal, toAppError } from '../redis/redis-errors';
import { Metrics } from '../telemetry/metrics';

/** Seconds a client should wait before retrying a 503. */
const RETRY_AFTER_S = '1';

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
