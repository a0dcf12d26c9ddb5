import { emit, eventsOn, sinceOrigin } from './events';

/** How often the lab is told the units sold: often enough for a live line, rare enough to cost Redis nothing. */
const EVENT_EVERY_MS = 150;

/** What a load counts as its answers arrive (bench/load.ts). */
export interface LoadProgress {
  done: number;
  /** Answers by code (CREATED for a 201), when the caller wants them live. */
  codes?: Record<string, number>;
}

/**
 * A live progress line on a TTY; a plain line every 5 s otherwise (CI logs). Under the
 * lab (bench/events.ts), also a `progress` event every EVENT_EVERY_MS: units sold (read
 * from Redis, as the line's are) and the answers so far, by code.
 */
export function startProgress(
  label: string,
  total: number,
  progress: LoadProgress,
  readStock: () => Promise<string | null>,
  stock: number,
): { stop(): void } {
  const tty = process.stderr.isTTY;
  let last = { at: Date.now(), done: 0 };
  const n = (x: number) => x.toLocaleString('en-US');
  const tick = async () => {
    const left = Number(await readStock().catch(() => null));
    const now = Date.now();
    const rate = Math.round(((progress.done - last.done) / Math.max(now - last.at, 1)) * 1000);
    last = { at: now, done: progress.done };
    const line = `[bench] ${label}: ${n(progress.done)}/${n(total)} requests, sold ${n(stock - left)}/${n(stock)}, ${n(rate)} req/s`;
    process.stderr.write(tty ? `\r\x1b[K${line}` : `${line}\n`);
  };
  const timer = setInterval(() => void tick(), tty ? 250 : 5_000);
  const events = watchSale(label, progress, readStock, stock);
  return {
    stop: () => {
      clearInterval(timer);
      events.stop();
      if (tty) process.stderr.write('\r\x1b[K');
    },
  };
}

/**
 * `progress` events for the lab until stopped: one now, then every EVENT_EVERY_MS; nothing
 * (no reads either) when no lab listens. The count of sold units is Redis's (stock -
 * what the key says is left), never the 201s.
 */
export function watchSale(
  label: string,
  progress: LoadProgress,
  readStock: () => Promise<string | null>,
  stock: number,
): { stop(): void } {
  if (!eventsOn) return { stop: () => undefined };
  progress.codes ??= {};
  let stopped = false;
  const tick = async () => {
    const left = await readStock().catch(() => null);
    if (stopped || left === null) return;
    const codes = { ...progress.codes };
    emit({ type: 'progress', label, ms: sinceOrigin(), done: progress.done, sold: stock - Number(left), stock, codes });
  };
  void tick();
  const timer = setInterval(() => void tick(), EVENT_EVERY_MS);
  return {
    stop: () => {
      clearInterval(timer);
      // One last reading, so the live line ends where the sale did: sent before the
      // verdict's reads on the same connection, so answered (and written) before them.
      void tick().finally(() => (stopped = true));
    },
  };
}
