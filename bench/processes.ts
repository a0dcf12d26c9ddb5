import { ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const ROOT = join(__dirname, '..', '..', '..');
const APP_MAIN = join(ROOT, 'dist', 'main.js');
const APP_CLUSTER = join(__dirname, 'app-cluster.js');
/** The minimal node:http server every row is compared with (`--baseline`). */
export const BASELINE_MAIN = join(__dirname, 'baselines', 'atomic-http.js');

/** Everything the bench started, so Ctrl-C or a failure stops all of it. */
const running = new Set<{ stop(): Promise<unknown> }>();

export function track<T extends { stop(): Promise<unknown> }>(thing: T): T {
  running.add(thing);
  return thing;
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
  /** SIGTERM (the app drains and exits 0), SIGKILL if it has not exited in 15 s. */
  stop(): Promise<number | null>;
}

/**
 * The built app, one process or `workers` processes behind node:cluster, on `port`.
 * Resolves once /health answers 200.
 */
export async function startApp(options: {
  workers: number;
  port: number;
  env: Record<string, string>;
  /** Entry point to run instead of the app (the baseline server). */
  main?: string;
}): Promise<RunningApp> {
  const main = options.main ?? APP_MAIN;
  const args = options.workers > 1 ? [APP_CLUSTER, String(options.workers), main] : [main];
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, ...options.env, PORT: String(options.port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString().split('\n').filter(Boolean));
    lines.splice(0, Math.max(0, lines.length - 40));
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const app: RunningApp = track({
    url: `http://127.0.0.1:${options.port}`,
    pid: child.pid!,
    tail: () => lines.join('\n'),
    stop: async () => {
      running.delete(app);
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(killer);
      return code;
    },
  });
  await waitForHealth(app, child);
  return app;
}

async function waitForHealth(app: RunningApp, child: ChildProcess, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the app exited (${child.exitCode}) before it was healthy:\n${app.tail()}`);
    const status = await fetch(`${app.url}/health`).then((r) => r.status, () => 0);
    if (status === 200) return;
    await sleep(50);
  }
  throw new Error(`the app did not answer /health with 200 within ${timeoutMs} ms:\n${app.tail()}`);
}

/** Starts (or restarts) a sale through the app's admin API. */
export async function startSale(url: string, token: string, productId: string, stock: number, perUserLimit: number) {
  const res = await fetch(`${url}/api/products/${productId}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ stock, perUserLimit }),
  });
  if (res.status !== 200) throw new Error(`sale setup for ${productId} failed: ${res.status} ${await res.text()}`);
}
