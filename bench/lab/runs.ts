/**
 * The lab's experiments: each Run is the real CLI (scripts/bench.js or
 * scripts/faults.js, the code `npm run bench` and `npm run faults` run) as a child in a
 * process group of its own, one at a time per lab: a second waits in line. The child
 * writes its events (bench/events.ts) to a pipe on fd 3; the lab keeps them and passes
 * them on, then reads the verdict the CLI wrote (the bench's JSON results, the fault
 * suite's outcome events). Stop ends the whole group: the CLI, its apps, its Redis.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Readable } from 'node:stream';
import type { LabEvent } from '../events';
import { htmlPathFor } from '../html-report';
import type { Row } from '../report';

export type RunRequest =
  | {
      readonly kind: 'strategy';
      readonly strategy: string;
      readonly buyers: number;
      readonly stock: number;
      readonly connections: number;
    }
  | { readonly kind: 'fault'; readonly scenario: string; readonly size: 'quick' | 'full' }
  | {
      /** One product on a 3-master cluster, its stock in `buckets` escrow buckets (bench/lab/shard-sale.ts). */
      readonly kind: 'shards';
      readonly buckets: number;
      readonly buyers: number;
      readonly stock: number;
      readonly connections: number;
    };

export type RunState = 'queued' | 'running' | 'done' | 'failed' | 'stopped' | 'timed-out';

/** What the lab adds to the CLI's own events. */
export type RunEvent =
  | LabEvent
  | {
      readonly type: 'state';
      readonly state: RunState;
      readonly position?: number;
      readonly exitCode?: number | null;
      readonly message?: string;
    }
  | { readonly type: 'result'; readonly rows?: readonly Row[]; readonly report?: string }
  | { readonly type: 'log'; readonly line: string };

/** The page's two lanes, side by side. */
export type Lane = 'left' | 'right';
/**
 * The lane of a run that names none (started through the API, or by a script): the
 * one the page's own Run button falls back to, so every run shows in a lane.
 */
export const DEFAULT_LANE: Lane = 'left';

export interface Run {
  readonly id: number;
  readonly request: RunRequest;
  /** Where the page shows it, side by side (DEFAULT_LANE unless the request named one). */
  readonly lane: Lane;
  /** The CLI command it runs, as a user would type it. */
  readonly command: string;
  state: RunState;
  /** In line: how many runs go first (the running one included). */
  position?: number;
  pid?: number;
  exitCode?: number | null;
  /** Why it failed or timed out, when the lab knows better than the CLI's last lines. */
  message?: string;
  readonly events: RunEvent[];
  /** Its JSON results (a bench run). */
  readonly out?: string;
  /** Its HTML report's path, relative to the checkout, once written. */
  report?: string;
}

/** The last lines a run printed, kept for the page when it fails. */
const LOG_LINES = 200;
/** Events kept per run (logs aside): past it, the oldest live samples go first. */
export const MAX_EVENTS = 5_000;
/** After SIGTERM the CLI stops its apps and Redis itself; past this, SIGKILL the group. */
const STOP_GRACE_MS = 15_000;
/** How long the last of a group, SIGKILLed, may take to be gone. */
const SWEEP_MS = 5_000;
/** Runs waiting in line at most: past it, a Run is refused and nothing queued. */
export const MAX_QUEUED = 20;
/** How long a run may take before it is stopped as timed out: a hung CLI must not hold the line. */
export function defaultDeadlineMs(request: RunRequest): number {
  return request.kind === 'fault' && request.size === 'full' ? 30 * 60_000 : 10 * 60_000;
}

/** The npm script each kind of run is, as its command names it. */
const NPM_SCRIPT: Record<RunRequest['kind'], string> = { strategy: 'bench', fault: 'faults', shards: 'lab:shards' };

/** A Run refused because the line is full. */
export class LineFullError extends Error {}

/** Every event of the session gets the next id (the SSE stream's `id:`), kept beside it. */
const eventIds = new WeakMap<RunEvent, number>();
/**
 * The highest event id any lab of this process gave: a lab started again in the same
 * process (the tests restart one on its port at once) within the millisecond of the last
 * one's events still numbers on from them. Across processes a restart takes far longer.
 */
let highestEventId = 0;
export const eventId = (event: RunEvent): number | undefined => eventIds.get(event);

export class Runs {
  private readonly all: Run[] = [];
  private readonly line: Run[] = [];
  private current?: {
    run: Run;
    child?: ChildProcess;
    exited: Promise<void>;
    stopping: boolean;
    timedOut: boolean;
  };
  private readonly listeners = new Set<(run: Run, event: RunEvent) => void>();
  /**
   * This lab's first event id, from its start time in microseconds, not 1: a browser
   * that followed a lab since restarted on the same port reconnects with the last id it
   * saw (Last-Event-ID), and must still be sent every event of the new session. A
   * session would have to make a thousand events per millisecond of its life for its
   * ids to reach the next one's. It also names the session (the stream says it first).
   */
  readonly session = Math.max(Date.now() * 1000, highestEventId + 1);
  private lastEventId = this.session;

  constructor(
    private readonly root: string,
    /** Where bench runs write their results and reports. */
    private readonly resultsDir: string,
    private readonly log: (line: string) => void = () => undefined,
    private readonly deadlineMs: (request: RunRequest) => number = defaultDeadlineMs,
  ) {}

  list(): readonly Run[] {
    return this.all;
  }

  get(id: number): Run | undefined {
    return this.all.find((r) => r.id === id);
  }

  /** Calls `fn` with every event of every run from now on; returns the unsubscribe. */
  subscribe(fn: (run: Run, event: RunEvent) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  submit(request: RunRequest, lane: Lane = DEFAULT_LANE): Run {
    if (this.line.length >= MAX_QUEUED) {
      throw new LineFullError(`${this.line.length} runs wait in line already (at most ${MAX_QUEUED}): nothing queued`);
    }
    const id = this.all.length + 1;
    const out = request.kind === 'strategy' ? join(this.resultsDir, `run-${id}.json`) : undefined;
    const args = this.argsFor(request, out);
    const run: Run = {
      id,
      request,
      lane,
      command: `npm run ${NPM_SCRIPT[request.kind]} -- ${args.slice(1).join(' ')}`,
      state: 'queued',
      events: [],
      ...(out && { out }),
    };
    this.all.push(run);
    this.line.push(run);
    this.inLine();
    void this.next();
    return run;
  }

  /** Ends a run: out of the line if it waits, its process group stopped if it runs. */
  async stop(run: Run): Promise<void> {
    const queued = this.line.indexOf(run);
    if (queued >= 0) {
      this.line.splice(queued, 1);
      this.setState(run, 'stopped');
      this.inLine();
      return;
    }
    const current = this.current;
    if (!current || current.run !== run || !current.child) return;
    current.stopping = true;
    const child = current.child;
    this.signal(child, 'SIGTERM');
    const killer = setTimeout(() => this.signal(child, 'SIGKILL'), STOP_GRACE_MS);
    await current.exited;
    clearTimeout(killer);
  }

  /** At once, synchronously (the lab's process exiting): SIGKILL the running run's whole group. */
  killNow(): void {
    if (this.current?.child) this.signal(this.current.child, 'SIGKILL');
  }

  /** Stops everything: the line emptied, the running group ended. */
  async close(): Promise<void> {
    for (const run of [...this.line]) await this.stop(run);
    if (this.current) await this.stop(this.current.run);
  }

  private argsFor(request: RunRequest, out?: string): string[] {
    if (request.kind === 'fault') {
      return [join('scripts', 'faults.js'), ...(request.size === 'quick' ? ['--quick'] : []), request.scenario];
    }
    if (request.kind === 'shards') {
      const { buckets, buyers, stock, connections } = request;
      return [
        join('scripts', 'shard-sale.js'),
        ...Object.entries({ buckets, buyers, stock, connections }).flatMap(([k, v]) => [`--${k}`, String(v)]),
      ];
    }
    return [
      join('scripts', 'bench.js'),
      '--strategy',
      request.strategy,
      '--buyers',
      String(request.buyers),
      '--stock',
      String(request.stock),
      '--connections',
      String(request.connections),
      // A lesson, not a measurement: no warm-up, no settlement into PostgreSQL.
      '--warmup',
      '0',
      '--settle',
      'off',
      '--out',
      relative(this.root, out!),
    ];
  }

  /** The next run in line, if none runs; a failure of the lab's own marks that run failed and goes on. */
  private async next(): Promise<void> {
    if (this.current || this.line.length === 0) return;
    const run = this.line.shift()!;
    // Taken before anything can fail: the line waits for this run, and no other starts beside it.
    this.current = { run, exited: Promise.resolve(), stopping: false, timedOut: false };
    try {
      await this.start(run);
    } catch (err) {
      this.signal(this.current.child, 'SIGKILL');
      await this.current.exited;
      run.message = `the lab failed to run it: ${(err as Error).message}`;
      this.log(`run ${run.id}: ${run.message}`);
      this.setState(run, 'failed', run.exitCode);
    }
    this.current = undefined;
    void this.next();
  }

  private async start(run: Run): Promise<void> {
    const current = this.current!;
    this.inLine();
    mkdirSync(this.resultsDir, { recursive: true });
    const args = this.argsFor(run.request, run.out);
    const child = spawn(process.execPath, args, {
      cwd: this.root,
      // Its own process group: Stop reaches the CLI and everything it started.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      env: { ...process.env, LAB_EVENTS_FD: '3' },
    });
    // Exited: the CLI, and whatever it left in its group (a Redis it had just started when
    // stopped, before it knew of it to stop it), killed and gone.
    current.exited = new Promise<void>((resolve) => child.once('close', () => resolve())).then(() => this.sweep(child));
    current.child = child;
    run.pid = child.pid;
    this.setState(run, 'running');
    this.log(`run ${run.id}: ${run.command} (pid ${child.pid})`);
    this.lines(child.stdio[3] as Readable, (line) => {
      try {
        this.add(run, JSON.parse(line) as LabEvent);
      } catch {
        // not an event: nothing the page can draw
      }
    });
    for (const stream of [child.stdout!, child.stderr!])
      this.lines(stream, (line) => this.add(run, { type: 'log', line }));
    const code = new Promise<number | null>((resolve) => {
      child.once('error', () => resolve(null));
      child.once('exit', (c) => resolve(c));
    });
    const deadline = this.deadlineMs(run.request);
    const timer = setTimeout(() => {
      // A run already being stopped (Stop pressed, or the lab closing) is not timed out.
      if (current.stopping) return;
      current.timedOut = true;
      run.message = `timed out: still running after ${Math.round(deadline / 1000)} s, stopped with its processes`;
      this.log(`run ${run.id}: ${run.message}`);
      void this.stop(run);
    }, deadline);
    try {
      run.exitCode = await code;
      // The CLI is done: whatever the sweep of its group takes, the run did not time out.
      clearTimeout(timer);
      await current.exited;
    } finally {
      clearTimeout(timer);
    }
    this.finish(run, current.stopping, current.timedOut);
  }

  /** The verdict the CLI left: the bench's JSON results, or the fault suite's outcome events. */
  private finish(run: Run, stopped: boolean, timedOut: boolean): void {
    let state: RunState = timedOut ? 'timed-out' : stopped ? 'stopped' : 'failed';
    if (!stopped && run.out && existsSync(run.out)) {
      const rows = (JSON.parse(readFileSync(run.out, 'utf8')) as { rows: Row[] }).rows;
      const report = htmlPathFor(run.out);
      if (existsSync(report)) run.report = relative(this.root, report);
      this.add(run, { type: 'result', rows, ...(run.report && { report: run.report }) });
      state = 'done';
    } else if (!stopped && run.events.some((e) => e.type === 'outcome')) {
      this.add(run, { type: 'result' });
      state = 'done';
    }
    this.setState(run, state, run.exitCode);
  }

  private setState(run: Run, state: RunState, exitCode?: number | null): void {
    run.state = state;
    if (state !== 'queued') delete run.position;
    this.add(run, {
      type: 'state',
      state,
      ...(run.position !== undefined && { position: run.position }),
      ...(exitCode !== undefined && { exitCode }),
      ...(run.message !== undefined && state !== 'queued' && state !== 'running' && { message: run.message }),
    });
  }

  /** Tells each waiting run its place: the running one first, then those ahead of it. */
  private inLine(): void {
    this.line.forEach((run, i) => {
      const position = i + (this.current ? 1 : 0);
      if (run.position === position) return;
      run.position = position;
      this.setState(run, 'queued');
    });
  }

  private add(run: Run, event: RunEvent): void {
    if (event.type === 'log') {
      const logs = run.events.filter((e) => e.type === 'log');
      if (logs.length >= LOG_LINES) run.events.splice(run.events.indexOf(logs[0]), 1);
    } else if (run.events.length - LOG_LINES >= MAX_EVENTS) {
      // A long run's live samples are the many: the oldest go, its steps and verdict stay.
      const oldest = run.events.findIndex((e) => e.type === 'progress' || e.type === 'log');
      run.events.splice(oldest >= 0 ? oldest : 0, 1);
    }
    eventIds.set(event, ++this.lastEventId);
    highestEventId = Math.max(highestEventId, this.lastEventId);
    run.events.push(event);
    for (const fn of this.listeners) fn(run, event);
  }

  private lines(stream: Readable, fn: (line: string) => void): void {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', fn);
  }

  private async sweep(child: ChildProcess): Promise<void> {
    this.signal(child, 'SIGKILL');
    for (const deadline = Date.now() + SWEEP_MS; Date.now() < deadline; await sleep(10)) {
      try {
        process.kill(-child.pid!, 0);
      } catch {
        return;
      }
    }
  }

  private signal(child: ChildProcess | undefined, signal: NodeJS.Signals): void {
    if (child?.pid === undefined) return;
    try {
      process.kill(-child.pid, signal);
    } catch {
      // the group is gone already
    }
  }
}
