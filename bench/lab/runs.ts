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
  | { readonly kind: 'fault'; readonly scenario: string; readonly size: 'quick' | 'full' };

export type RunState = 'queued' | 'running' | 'done' | 'failed' | 'stopped';

/** What the lab adds to the CLI's own events. */
export type RunEvent =
  | LabEvent
  | { readonly type: 'state'; readonly state: RunState; readonly position?: number; readonly exitCode?: number | null }
  | { readonly type: 'result'; readonly rows?: readonly Row[]; readonly report?: string }
  | { readonly type: 'log'; readonly line: string };

export interface Run {
  readonly id: number;
  readonly request: RunRequest;
  /** Where the page shows it, side by side. */
  readonly lane?: 'left' | 'right';
  /** The CLI command it runs, as a user would type it. */
  readonly command: string;
  state: RunState;
  /** In line: how many runs go first (the running one included). */
  position?: number;
  pid?: number;
  exitCode?: number | null;
  readonly events: RunEvent[];
  /** Its JSON results (a bench run). */
  readonly out?: string;
  /** Its HTML report's path, relative to the checkout, once written. */
  report?: string;
}

/** The last lines a run printed, kept for the page when it fails. */
const LOG_LINES = 200;
/** After SIGTERM the CLI stops its apps and Redis itself; past this, SIGKILL the group. */
const STOP_GRACE_MS = 15_000;

export class Runs {
  private readonly all: Run[] = [];
  private readonly line: Run[] = [];
  private current?: { run: Run; child: ChildProcess; exited: Promise<void>; stopping: boolean };
  private readonly listeners = new Set<(run: Run, event: RunEvent) => void>();

  constructor(
    private readonly root: string,
    /** Where bench runs write their results and reports. */
    private readonly resultsDir: string,
    private readonly log: (line: string) => void = () => undefined,
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

  submit(request: RunRequest, lane?: 'left' | 'right'): Run {
    const id = this.all.length + 1;
    const out = request.kind === 'strategy' ? join(this.resultsDir, `run-${id}.json`) : undefined;
    const args = this.argsFor(request, out);
    const run: Run = {
      id,
      request,
      ...(lane && { lane }),
      command: `npm run ${request.kind === 'strategy' ? 'bench' : 'faults'} -- ${args.slice(1).join(' ')}`,
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
    if (!current || current.run !== run) return;
    current.stopping = true;
    this.signal(current.child, 'SIGTERM');
    const killer = setTimeout(() => this.signal(current.child, 'SIGKILL'), STOP_GRACE_MS);
    await current.exited;
    clearTimeout(killer);
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

  private async next(): Promise<void> {
    if (this.current || this.line.length === 0) return;
    const run = this.line.shift()!;
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
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    this.current = { run, child, exited, stopping: false };
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
    const code = await new Promise<number | null>((resolve) => {
      child.once('error', () => resolve(null));
      child.once('exit', (c) => resolve(c));
    });
    await exited;
    const stopped = this.current.stopping;
    this.current = undefined;
    run.exitCode = code;
    this.finish(run, stopped);
    void this.next();
  }

  /** The verdict the CLI left: the bench's JSON results, or the fault suite's outcome events. */
  private finish(run: Run, stopped: boolean): void {
    let state: RunState = stopped ? 'stopped' : 'failed';
    if (!stopped && run.out && existsSync(run.out)) {
      const report = htmlPathFor(run.out);
      run.report = relative(this.root, report);
      const rows = (JSON.parse(readFileSync(run.out, 'utf8')) as { rows: Row[] }).rows;
      this.add(run, { type: 'result', rows, report: run.report });
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
    }
    run.events.push(event);
    for (const fn of this.listeners) fn(run, event);
  }

  private lines(stream: Readable, fn: (line: string) => void): void {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', fn);
  }

  private signal(child: ChildProcess, signal: NodeJS.Signals): void {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      // the group is gone already
    }
  }
}
