import { Logger } from '@nestjs/common';
import { type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { BurstLog } from '../errors/burst-log';
import { errorBody } from '../errors/error-body';
import { AppError, BadRequestError, FRAMEWORK_ERRORS, InternalError } from '../errors/errors';

/** What a request that never arrived in time is answered: Node's request timeout, or the shutdown deadline. */
export function requestTimeoutError(): AppError {
  return new FRAMEWORK_ERRORS[408]('the request did not arrive in time');
}

/**
 * A request Node's HTTP parser cannot read (headers too large, garbage, too slow) never
 * reaches Fastify's routes; Fastify's own answer has no `code`. The handler made here
 * writes the same body as every other error, then closes the socket as Node and Fastify
 * do. A request that did not arrive within REQUEST_TIMEOUT_MS is the client's doing (a
 * slow network, or an attack that opens many slow requests): a warning, one per burst
 * with its count, as the other bursts are logged (BurstLog).
 */
export function clientErrorHandler(
  requestTimeoutMs: number,
  /** The answer's X-Request-Id: that of the request Node had begun to read, if any. */
  requestIdOf: (req: IncomingMessage | undefined) => string,
): (err: NodeJS.ErrnoException, socket: Socket) => void {
  const logger = new Logger('HTTP');
  const slow = new BurstLog((line) => logger.warn(line));
  return (err, socket) => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    // A request read in full earlier on this connection is still being answered
    // (pipelining): an answer written now would be taken for that request's. Close
    // instead; its client sees a cut connection, not a false answer. (A request still
    // arriving, timed out or malformed halfway, is the one the error is about: answered.)
    const pending = pendingRequest(socket);
    if (pending?.complete) {
      socket.destroy(err);
      return;
    }
    let known: AppError;
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      known = requestTimeoutError();
      slow.say(
        known.code,
        `a request did not arrive within REQUEST_TIMEOUT_MS (${requestTimeoutMs} ms): answered 408 ${known.code} and closed`,
      );
    } else if (err.code === 'HPE_HEADER_OVERFLOW') {
      known = new FRAMEWORK_ERRORS[431]('the request headers are too large');
    } else {
      known = new BadRequestError('the request is not valid HTTP');
    }
    answerOnSocket(socket, known, requestIdOf(pending));
  };
}

/** The request Node has attached to `socket` (`_httpMessage`: set when its headers are read, cleared once it is answered). */
export function pendingRequest(socket: Socket): IncomingMessage | undefined {
  return (socket as Socket & { _httpMessage?: { req?: IncomingMessage } | null })._httpMessage?.req;
}

/**
 * What Fastify's router refuses before any route is found (its frameworkErrors): a URL
 * it cannot percent-decode, a path parameter over its length limit. Fastify's message
 * quotes the URL, which is the client's own input and may be kilobytes long: this one
 * names the problem only.
 */
export function routerRefusal(error: { code?: string; statusCode?: number }, maxParamLength: number): AppError {
  if (error.code === 'FST_ERR_BAD_URL') return new BadRequestError('the URL is not validly percent-encoded');
  if (error.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return new FRAMEWORK_ERRORS[414](
      `a path parameter of the URL is over the router's limit of ${maxParamLength} characters`,
    );
  }
  const status = error.statusCode ?? 500;
  if (status >= 500) return new InternalError();
  return new (FRAMEWORK_ERRORS[status] ?? BadRequestError)(STATUS_CODES[status] ?? 'the request was refused');
}

/**
 * Writes `error` as a whole HTTP response straight onto the socket and closes it. Only
 * for a socket on which no response has begun: the bytes would otherwise land inside one.
 */
export function answerOnSocket(socket: Socket, error: AppError, requestId?: string): void {
  if (socket.destroyed) return;
  const body = JSON.stringify(errorBody(error));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\n${requestId === undefined ? '' : `X-Request-Id: ${requestId}\r\n`}` +
        `Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
