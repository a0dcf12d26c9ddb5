import { LogLevel as NestLogLevel } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { AppModule } from './app.module';
import { AppConfig, LOG_LEVELS } from './config/app-config';
import { errorBody } from './errors/error.filter';
import { AppError, BadRequestError, FRAMEWORK_ERRORS, ValidationFailedError } from './errors/errors';

/** Bodies larger than this are refused with 413 before they are parsed. */
export const BODY_LIMIT_BYTES = 16 * 1024;

/**
 * Builds the app exactly as main.ts runs it, so tests exercise the real HTTP
 * stack: Fastify limits, content-type handling, pipes and filters.
 */
export async function createApp(config: AppConfig, options: { logger?: false } = {}): Promise<NestFastifyApplication> {
  // A request that arrives on an open connection while we drain is served, not
  // answered with Fastify's bare 503 (which has no `code`).
  const adapter = new FastifyAdapter({
    bodyLimit: BODY_LIMIT_BYTES,
    return503OnClosing: false,
    // Fastify refuses some URLs before Nest sees the request; give them the same body
    // shape as every other error, and never echo a long URL back in full.
    frameworkErrors: (error: Error & { statusCode?: number }, _request: FastifyRequest, reply: FastifyReply) => {
      // A URL it cannot decode (400), a path parameter over its length limit (414).
      const Known = (error.statusCode && FRAMEWORK_ERRORS[error.statusCode]) || ValidationFailedError;
      const known = new Known(error.message.length > 200 ? `${error.message.slice(0, 200)}...` : error.message);
      void reply.status(known.status).send(errorBody(known));
    },
    clientErrorHandler: answerClientError,
  });
  const fastify = adapter.getInstance();
  // Only JSON bodies: Fastify would otherwise parse text/plain into a string and
  // hand it to validation; refusing it up front gives a clear 415.
  fastify.removeContentTypeParser('text/plain');
  // Graceful drain: close() stops accepting and reaps idle keep-alive sockets once,
  // but a socket whose request was in flight would then idle on for the keep-alive
  // timeout (72 s) and hold shutdown open. Once closing, every response says
  // `Connection: close`, so each socket ends with its last answer.
  let draining = false;
  fastify.addHook('preClose', (done) => {
    draining = true;
    done();
  });
  fastify.addHook('onSend', (_request, reply, payload, done) => {
    if (draining) void reply.header('connection', 'close');
    done(null, payload);
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config), adapter, {
    logger: options.logger ?? enabledLevels(config),
    // No urlencoded parser: Fastify's own JSON parser is the only one registered.
    bodyParser: false,
  });
  await app.init();
  return app;
}

/**
 * A request Node's HTTP parser cannot read (headers too large, garbage, too slow) never
 * reaches Fastify's routes; Fastify's own answer has no `code`. This one writes the
 * same body as every other error, then closes the socket as Node and Fastify do.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // A request read earlier on this connection is still being answered (pipelining):
  // an answer written now would be taken for that request's. Close instead; its
  // client sees a cut connection, not a false answer.
  if ((socket as Socket & { _httpMessage?: unknown })._httpMessage) {
    socket.destroy(err);
    return;
  }
  let known: AppError;
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') known = new FRAMEWORK_ERRORS[408]('the request did not arrive in time');
  else if (err.code === 'HPE_HEADER_OVERFLOW') known = new FRAMEWORK_ERRORS[431]('the request headers are too large');
  else known = new BadRequestError('the request is not valid HTTP');
  const body = JSON.stringify(errorBody(known));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${known.status} ${STATUS_CODES[known.status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

/** LOG_LEVEL names the least severe level shown: `log` shows error, warn and log. */
function enabledLevels(config: AppConfig): NestLogLevel[] {
  return LOG_LEVELS.slice(0, LOG_LEVELS.indexOf(config.logLevel) + 1) as NestLogLevel[];
}
