/**
 * `npm run lab`: the lab's web server (node:http, loopback only unless told) — the
 * page, its scripts, the lessons, and a small JSON API that starts, lists and stops
 * runs (bench/lab/runs.ts) and streams their events as Server-Sent Events. Bad input
 * is answered as the app answers it ({statusCode, code, message}) and starts nothing.
 *
 *   npm run lab                        http://127.0.0.1:<free port>/
 *   LAB_PORT=8080 npm run lab
 *   LAB_HOST=0.0.0.0 LAB_ALLOW_REMOTE=1 npm run lab    anyone who can reach it can start runs
 */
import { createReadStream, existsSync, readFileSync, statSync } from 'node:fs';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo, isIP } from 'node:net';
import { join, normalize, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT } from '../../harness/paths';
import { LOCK_STRATEGY_NAMES } from '../../src/config/app-config';
import { errorBody } from '../../src/errors/error-body';
import {
  AppError,
  BadRequestError,
  FRAMEWORK_ERRORS,
  InternalError,
  ValidationFailedError,
} from '../../src/errors/errors';
import { SCENARIO_NAMES } from '../faults/run';
import { chartJsSource } from '../html-report';
import { catalogue, SHARD_LESSON_BUCKETS } from './lessons';
import { KNOBS, renderPage } from './page';
import { eventId, Lane, LineFullError, Run, RunEvent, RunRequest, Runs } from './runs';

const NotFoundError = FRAMEWORK_ERRORS[404];
const UnsupportedMediaTypeError = FRAMEWORK_ERRORS[415];
const PayloadTooLargeError = FRAMEWORK_ERRORS[413];

/** The line of waiting runs is full: try again once some have run (the lab's own code, not the app's). */
class LabLineFullError extends AppError {
  readonly code = 'LAB_LINE_FULL';
  readonly status = 429;
  /** A quick run takes about this long: the line has moved by then. */
  override readonly retryAfterS = 10;
}

/** A run request is a few fields: anything bigger is not one. */
const MAX_BODY_BYTES = 16 * 1024;

export interface LabOptions {
  readonly host: string;
  /** 0: a free one. */
  readonly port: number;
  /** Bind a non-loopback address: anyone who reaches it can start experiments. */
  readonly allowRemote: boolean;
  /** Where bench runs write their results (default bench/results/lab-<time>/). */
  readonly resultsDir?: string;
  readonly log?: (line: string) => void;
}

export interface RunningLab {
  readonly url: string;
  readonly runs: Runs;
  close(): Promise<void>;
}

/** Refused before anything binds: a lab on a shared network runs anyone's experiments. */
export class LoopbackOnlyError extends Error {}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
}

export async function startLab(options: LabOptions): Promise<RunningLab> {
  if (!isLoopback(options.host) && !options.allowRemote) {
    throw new LoopbackOnlyError(
      `the lab binds loopback only (127.0.0.1, ::1): ${options.host} would let anyone who reaches it start experiments on this machine; ` +
        'set LAB_ALLOW_REMOTE=1 (or --allow-remote) to bind it anyway',
    );
  }
  const log = options.log ?? (() => undefined);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const runs = new Runs(ROOT, options.resultsDir ?? join(ROOT, 'bench', 'results', `lab-${stamp}`), log);
  // Filled in once listening: the Host headers this lab answers (DNS rebinding: a web page
  // whose name now points at 127.0.0.1 sends its own name, and is refused).
  const hosts = new Set<string>();
  const server = createServer((req, res) => {
    if (!options.allowRemote && !hosts.has((req.headers.host ?? '').toLowerCase())) {
      req.resume();
      return answerError(
        res,
        new NotFoundError(`the lab answers only requests addressed to it by loopback (Host: ${[...hosts][0]})`),
      );
    }
    handle(req, res, runs).catch((err: unknown) => answerError(res, err));
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(options.port, options.host, () => ok());
  });
  const { port, address } = server.address() as AddressInfo;
  const host = isIP(address) === 6 ? `[${address}]` : address;
  for (const name of [host, 'localhost', '127.0.0.1', '[::1]']) hosts.add(`${name}:${port}`.toLowerCase());
  return {
    url: `http://${host}:${port}/`,
    runs,
    close: async () => {
      await runs.close();
      await closeServer(server);
    },
  };
}

function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((ok) => server.close(() => ok()));
}

/** The files the page loads: the lab's own, and Chart.js and Mermaid from node_modules, never a CDN. */
const ASSETS: Record<string, { type: string; body: () => string | Buffer }> = {
  // The dashboard's icon, one file for both pages: a browser asks for it, and a 404 is an error in its console.
  '/favicon.ico': {
    type: 'image/svg+xml',
    body: () => readFileSync(join(ROOT, 'src', 'dashboard', 'public', 'favicon.svg')),
  },
  '/lab.js': { type: 'text/javascript', body: () => readFileSync(join(ROOT, 'bench', 'lab', 'public', 'lab.js')) },
  '/lab.css': { type: 'text/css', body: () => readFileSync(join(ROOT, 'bench', 'lab', 'public', 'lab.css')) },
  '/vendor/chart.js': { type: 'text/javascript', body: chartJsSource },
  '/vendor/mermaid.js': {
    type: 'text/javascript',
    body: () => readFileSync(join(ROOT, 'node_modules', 'mermaid', 'dist', 'mermaid.min.js')),
  },
};

async function handle(req: IncomingMessage, res: ServerResponse, runs: Runs): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://lab');
  const path = url.pathname;
  const method = req.method ?? 'GET';
  if (method === 'GET' && path === '/') return send(res, 200, 'text/html; charset=utf-8', renderPage(catalogue(ROOT)));
  if (method === 'GET' && ASSETS[path]) return send(res, 200, ASSETS[path].type, ASSETS[path].body());
  if (method === 'GET' && path === '/api/lessons') return json(res, 200, catalogue(ROOT));
  if (method === 'GET' && path === '/api/runs') return json(res, 200, runs.list().map(summary));
  if (method === 'POST' && path === '/api/runs') {
    const { lane, ...request } = parseRunRequest(await readJson(req));
    try {
      return json(res, 202, summary(runs.submit(request as RunRequest, lane)));
    } catch (err) {
      throw err instanceof LineFullError ? new LabLineFullError(err.message) : err;
    }
  }
  if (method === 'GET' && path === '/api/events') return streamEvents(req, res, runs);
  if (method === 'GET' && path.startsWith('/source/')) return sendSource(res, decodeURIComponent(path.slice(8)));
  const m = /^\/(api\/runs|runs)\/([^/]+)(\/stop|\/report)?$/.exec(path);
  if (m) {
    const run = /^\d{1,9}$/.test(m[2]) ? runs.get(Number(m[2])) : undefined;
    if (!run) throw new NotFoundError(`no run ${m[2]} in this session`);
    if (method === 'GET' && m[1] === 'api/runs' && !m[3])
      return json(res, 200, { ...summary(run), events: run.events });
    if (method === 'POST' && m[1] === 'api/runs' && m[3] === '/stop') {
      // JSON only, as every POST here: a cross-site form cannot send it without asking first.
      await readJson(req);
      await runs.stop(run);
      return json(res, 200, summary(run));
    }
    if (method === 'GET' && m[1] === 'runs' && m[3] === '/report') {
      // Checked now, not only when the run ended: a report deleted since is a 404, no path shown.
      if (!run.report || !existsSync(join(ROOT, run.report)))
        throw new NotFoundError(`run ${run.id} has no HTML report (${run.state})`);
      return send(res, 200, 'text/html; charset=utf-8', readFileSync(join(ROOT, run.report)));
    }
  }
  throw new NotFoundError(`${method} ${path} is not a route of the lab`);
}

/** What the page and the API show of a run (its events come by /api/events or /api/runs/:id). */
export function summary(run: Run) {
  const { events: _events, out: _out, ...rest } = run;
  return { ...rest, ...(run.report && { reportUrl: `/runs/${run.id}/report` }) };
}

/**
 * Every event of the session so far, then each as it happens: `{ run, event }` per
 * message, each with its `id:`. A browser reconnecting sends the last it saw
 * (Last-Event-ID) and gets only those after it: nothing twice. Ids grow across
 * restarts of the lab (Runs.session), so one from an earlier lab gets the whole of
 * this one's. First comes a `session` event (no id) naming this lab: a page that
 * followed another one learns that its runs are gone.
 */
function streamEvents(req: IncomingMessage, res: ServerResponse, runs: Runs): void {
  const header = req.headers['last-event-id'];
  const after = typeof header === 'string' && /^\d{1,16}$/.test(header) ? Number(header) : 0;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
  res.write(`event: session\ndata: ${JSON.stringify({ session: runs.session })}\n\n`);
  const write = (run: Run, event: RunEvent) =>
    res.write(`id: ${eventId(event)}\ndata: ${JSON.stringify({ run: summary(run), event })}\n\n`);
  const past = runs
    .list()
    .flatMap((run) => run.events.map((event) => ({ run, event, id: eventId(event) ?? 0 })))
    .filter((e) => e.id > after)
    .sort((a, b) => a.id - b.id);
  for (const { run, event } of past) write(run, event);
  const unsubscribe = runs.subscribe(write);
  req.on('close', unsubscribe);
}

/** A file the page links to: a reading guide's source or a docs page, and nothing outside the checkout's sources. */
function sendSource(res: ServerResponse, path: string): void {
  const file = resolve(ROOT, normalize(path));
  const allowed = ['src', 'bench', 'harness', 'docs', 'scripts', 'test'].some((dir) =>
    file.startsWith(join(ROOT, dir) + '/'),
  );
  if (!allowed || !existsSync(file) || !statSync(file).isFile()) throw new NotFoundError(`no source file ${path}`);
  res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
  createReadStream(file).pipe(res);
}

function send(
  res: ServerResponse,
  status: number,
  type: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', ...headers });
  res.end(body);
}

function json(res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>): void {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(body), headers);
}

function answerError(res: ServerResponse, err: unknown): void {
  // A path that is not even a URL is the client's; anything else unexpected is the lab's own 500.
  const known: AppError =
    err instanceof AppError
      ? err
      : err instanceof URIError
        ? new BadRequestError(`the path is not a valid URL: ${err.message}`)
        : new InternalError();
  if (!(err instanceof AppError) && !(err instanceof URIError))
    process.stderr.write(`[lab] ${String((err as Error)?.stack ?? err)}\n`);
  if (res.headersSent) {
    res.end();
    return;
  }
  const retryAfter = known.retryAfterS === undefined ? undefined : { 'retry-after': String(known.retryAfterS) };
  json(res, known.status, errorBody(known), retryAfter);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const type = req.headers['content-type'] ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    req.resume();
    throw new UnsupportedMediaTypeError(`a run request is JSON: Content-Type: application/json, got "${type}"`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new PayloadTooLargeError(`a run request is at most ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new BadRequestError('the body is not valid JSON');
  }
}

type FieldErrors = { field: string; messages: string[] }[];

/**
 * A run request, checked as the app's strict pipe checks a body: every field known and
 * in bounds, or VALIDATION_FAILED naming each field, and nothing started.
 */
export function parseRunRequest(body: unknown): RunRequest & { lane?: Lane } {
  const errors: FieldErrors = [];
  const fail = (field: string, message: string) => errors.push({ field, messages: [message] });
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ValidationFailedError('the body must be a JSON object', [{ field: '', messages: ['must be an object'] }]);
  }
  const b = body as Record<string, unknown>;
  const kind = b.kind;
  const fields: Record<string, readonly string[]> = {
    strategy: ['kind', 'strategy', 'buyers', 'stock', 'connections', 'lane'],
    fault: ['kind', 'scenario', 'size', 'lane'],
    shards: ['kind', 'buckets', 'buyers', 'stock', 'connections', 'lane'],
  };
  if (kind !== 'strategy' && kind !== 'fault' && kind !== 'shards')
    fail('kind', 'kind must be one of: strategy, fault, shards');
  for (const key of Object.keys(b)) {
    if (Object.hasOwn(fields, kind as string) && !fields[kind as string].includes(key)) {
      fail(key, `property ${key} should not exist`);
    }
  }
  if (b.lane !== undefined && b.lane !== 'left' && b.lane !== 'right') fail('lane', 'lane must be one of: left, right');
  const lane = b.lane as Lane | undefined;
  const int = (name: keyof typeof KNOBS): number => {
    const { min, max, value } = KNOBS[name];
    const v = b[name] ?? value;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
      fail(name, `${name} must be an integer from ${min} to ${max}`);
    }
    return v as number;
  };
  let request: RunRequest | undefined;
  if (kind === 'strategy') {
    const strategy = b.strategy;
    if (typeof strategy !== 'string' || !(LOCK_STRATEGY_NAMES as readonly string[]).includes(strategy)) {
      fail('strategy', `strategy must be one of: ${LOCK_STRATEGY_NAMES.join(', ')}`);
    }
    request = {
      kind,
      strategy: strategy as string,
      buyers: int('buyers'),
      stock: int('stock'),
      connections: int('connections'),
    };
  } else if (kind === 'fault') {
    if (typeof b.scenario !== 'string' || !SCENARIO_NAMES.includes(b.scenario)) {
      fail('scenario', `scenario must be one of the fault suite's: ${SCENARIO_NAMES.join(', ')}`);
    }
    const size = b.size ?? 'quick';
    if (size !== 'quick' && size !== 'full') fail('size', 'size must be one of: quick, full');
    request = { kind, scenario: b.scenario as string, size: size as 'quick' | 'full' };
  } else if (kind === 'shards') {
    // The lessons' counts only: the page offers them, and each is a docs section's.
    if (typeof b.buckets !== 'number' || !SHARD_LESSON_BUCKETS.includes(b.buckets)) {
      fail('buckets', `buckets must be one of: ${SHARD_LESSON_BUCKETS.join(', ')}`);
    }
    request = {
      kind,
      buckets: b.buckets as number,
      buyers: int('buyers'),
      stock: int('stock'),
      connections: int('connections'),
    };
  }
  if (errors.length > 0 || !request) {
    throw new ValidationFailedError(errors.map((e) => e.messages.join('; ')).join('; '), errors);
  }
  return { ...request, ...(lane && { lane }) };
}

/** Entry point (scripts/lab.js). */
export function cli(): void {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      host: { type: 'string', default: process.env.LAB_HOST ?? '127.0.0.1' },
      port: { type: 'string', default: process.env.LAB_PORT ?? '0' },
      'allow-remote': { type: 'boolean', default: process.env.LAB_ALLOW_REMOTE === '1' },
    },
  });
  const log = (line: string) => process.stderr.write(`[lab] ${line}\n`);
  const port = Number(values.port);
  if (!/^\d+$/.test(values.port!) || port > 65535) {
    log(`LAB_PORT (--port) must be a port number, got "${values.port}"`);
    process.exit(2);
  }
  startLab({ host: values.host!, port, allowRemote: values['allow-remote']!, log }).then(
    (lab) => {
      process.stdout.write(`lab: ${lab.url}\n`);
      // However the lab ends (a signal, a crash of its own), the run in progress ends with it.
      process.on('exit', () => lab.runs.killNow());
      let stopping = false;
      // SIGHUP too: the terminal it ran in closed.
      for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
        process.on(signal, () => {
          if (stopping) return;
          stopping = true;
          log(`${signal}: stopping the run in progress, if any`);
          void lab.close().finally(() => process.exit(0));
        });
      }
    },
    (err: Error) => {
      log(err.message);
      process.exit(err instanceof LoopbackOnlyError ? 2 : 1);
    },
  );
}
