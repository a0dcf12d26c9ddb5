import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { freePort } from '../scripts/redis-server';
import { waitForHealth } from './http';
import { APP_CLUSTER, APP_CWD, APP_MAIN } from './paths';

/** Everything started here (apps, private Redis servers), so Ctrl-C or a failure stops all of it. */
const running = new Set<{ stop(): Promise<unknown> }>();

export interface Tracked {
  /** Forget it: it was stopped by other means. */
  delete(): void;
}

export function track(thing: { stop(): Promise<unknown> }): Tracked {
  running.add(thing);
  return { delete: () => running.delete(thing) };
}

export async function stopAll(): Promise<void> {
  const all = [...running];
  running.clear();
  await Promise.allSettled(all.map((t) => t.stop()));
}

export interface RunningApp {
  readonly url: string;
  readonly pid: number;
  /** The last lines the app printed, for an error message. */
  tail(): string;
  /** SIGTERM (the app drains and exits 0), SIGKILL if it has not exited in 15 s; the exit code. */
  stop(): Promise<number | null>;
}

export interface AppOptions {
  /** App processes sharing the port through node:cluster (default 1: the app alone). */
  readonly workers?: number;
  /** Default: a free one. */
  readonly port?: number;
  readonly env: Record<string, string>;
  /** Entry point to run instead of the app (the baseline server). */
  readonly main?: string;
  /** The directory it runs in (where it reads .env); default the project's root. */
  readonly cwd?: string;
}

/**
 * The built app as a real process (or `workers` processes behind node:cluster) on
 * 127.0.0.1; resolves once /health answers 200.
 */
export async function startApp(options: AppOptions): Promise<RunningApp> {
  // A port free when asked can be taken before the app binds it (the kernel hands it to
  // an outgoing connection as its source port, or another test's server takes it): the
  // app then exits with EADDRINUSE before it is healthy. A port it was not given is
  // picked again, a few times.
  for (let tries = 1; ; tries++) {
    try {
      return await startAppOn(options, options.port ?? (await freePort()));
    } catch (err) {
      if (options.port !== undefined || tries >= 3 || !/EADDRINUSE/.test((err as Error).message)) throw err;
    }
  }
}

async function startAppOn(options: AppOptions, port: number): Promise<RunningApp> {
  const main = options.main ?? APP_MAIN;
  const workers = options.workers ?? 1;
  const args = workers > 1 ? [APP_CLUSTER, String(workers), main] : [main];
  let child: ChildProcess;
  try {
    child = spawn(process.execPath, args, {
      cwd: options.cwd ?? APP_CWD,
      env: { ...process.env, ...options.env, PORT: String(port), HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // A spawn that fails later (ENOENT, EACCES, EAGAIN) emits 'error', never 'exit': unheard,
    // it would crash the caller before its cleanup stops the servers it started for the app.
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', reject);
    });
  } catch (err) {
    throw new Error(`the app could not be started: ${(err as Error).message}`, { cause: err });
  }
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString().split('\n').filter(Boolean));
    lines.splice(0, Math.max(0, lines.length - 40));
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  // Later errors (a signal it could not be sent) are its tail's, not the caller's crash.
  child.on('error', (err) => keep(Buffer.from(`[harness] ${err.message}`)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const tracked = track({ stop: () => app.stop() });
  const app: RunningApp = {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid!,
    tail: () => lines.join('\n'),
    stop: async () => {
      tracked.delete();
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      // A stopped process (SIGSTOP) cannot act on SIGTERM until it runs again.
      child.kill('SIGCONT');
      const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(killer);
      return code;
    },
  };
  await waitForHealth(app.url, { timeoutMs: 30_000, failed: () => exitedEarly(child, app) });
  return app;
}

function exitedEarly(child: ChildProcess, app: RunningApp): string | null {
  return child.exitCode === null ? null : `the app exited (${child.exitCode}) before it was healthy:\n${app.tail()}`;
}

/** The process's state letter (from /proc on Linux, else ps): R, S, D, T (stopped), Z, or null once it is gone. */
export function processState(pid: number): string | null {
  try {
    // The command name is in parentheses and may hold spaces: the state follows the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    if (existsSync('/proc/self/stat')) return null; // Linux: no such process
  }
  // No /proc (macOS): ps prints the same state letters.
  const ps = spawnSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' });
  return ps.status === 0 ? ps.stdout.trim().slice(0, 1) || null : null;
}
