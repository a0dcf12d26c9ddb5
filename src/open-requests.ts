import type { Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { answerOnSocket, requestTimeoutError } from './http/client-error';
import { errorBody } from './errors/error-body';
import { OutcomeUnknownError } from './errors/errors';
import { contextOf } from './telemetry/http-requests';

/** What the shutdown deadline found still open, and did with it. */
export interface Cut {
  /** Requests that had not fully arrived (or not even begun): each answered 408 REQUEST_TIMEOUT. */
  readonly unfinished: number;
  /** `METHOD /url` of each request our code had received whole and not yet answered: answered 503 OUTCOME_UNKNOWN (or, if its answer had begun, cut). */
  readonly inProgress: readonly string[];
}

/**
 * Every open connection of the HTTP server and the request it is serving, so that a
 * shutdown deadline can tell a slow client from work under way. Fastify's close()
 * waits for both, and Node stops its request-timeout checks once close() begins, so
 * without a deadline one client that sends half a body holds the process forever.
 */
export class OpenRequests {
  private readonly connections = new Set<Socket>();

  // Only connections are tracked, not each request: a listener per request cost about
  // 1% of the app's CPU under a burst. A connection's request in progress is the one
  // whose response Node has attached to it (`_httpMessage`: set when the request is
  // read, cleared when its answer is done, as client-error.ts also reads it).
  constructor(server: Server) {
    server.on('connection', (socket: Socket) => {
      this.connections.add(socket);
      socket.once('close', () => this.connections.delete(socket));
    });
  }

  /**
   * Ends every connection still open. A request still arriving gets the answer Node's
   * request timeout would have given (408, nothing was done). A request in progress
   * may be mid-write: it is answered the truth, 503 OUTCOME_UNKNOWN (retry with the
   * same Idempotency-Key to learn which), then its connection is closed; one whose
   * answer had begun is just closed. Each is reported.
   */
  cut(): Cut {
    let unfinished = 0;
    const inProgress: string[] = [];
    for (const socket of this.connections) {
      const res = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
      const current = res?.req ? { req: res.req, res } : null;
      if (current && (current.req.complete || current.res.headersSent)) {
        inProgress.push(`${current.req.method} ${current.req.url}`);
        if (!current.res.headersSent) {
          const body = JSON.stringify(errorBody(new OutcomeUnknownError()));
          current.res.writeHead(503, {
            'content-type': 'application/json; charset=utf-8',
            'content-length': Buffer.byteLength(body),
            'retry-after': '1',
            connection: 'close',
          });
          current.res.end(body, () => socket.destroy());
        } else {
          socket.destroy();
        }
      } else {
        unfinished++;
        answerOnSocket(socket, requestTimeoutError(), current ? contextOf(current.req)?.id : undefined);
      }
    }
    return { unfinished, inProgress };
  }
}
