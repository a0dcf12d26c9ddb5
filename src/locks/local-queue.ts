import { LockTimeoutError } from '../errors/errors';

interface Waiter {
  resolve(): void;
  reject(err: unknown): void;
}

interface Line {
  busy: boolean;
  readonly waiters: Waiter[];
}

/**
 * An in-process FIFO per lock key: of all the buyers of one product waiting in this
 * process, only the one at the head contends for the Redis lock; the rest wait here
 * without sending anything. Without it, a thousand waiters each retrying SET NX
 * flood Redis and the client's one connection, and the holder's own commands queue
 * behind the retries: the sale crawls and waiters time out while stock remains.
 *
 * The queue is only a traffic shaper: mutual exclusion comes from the Redis lock,
 * across processes and within this one.
 */
export class LocalQueue {
  private readonly lines = new Map<string, Line>();

  /** `timedOut`: what a caller that waited `waitMs` in vain is told (a lock's line: LOCK_TIMEOUT). */
  constructor(private readonly timedOut: (waitMs: number) => Error = (waitMs) => new LockTimeoutError(waitMs)) {}

  /**
   * Resolves when it is this caller's turn. Rejects with `timedOut(waitMs)` after
   * `waitMs`, or with the signal's reason when `signal` aborts; either way the caller
   * is out of line. Every resolved `enter` must be followed by exactly one `leave`.
   */
  enter(key: string, waitMs: number, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    let line = this.lines.get(key);
    if (!line) {
      line = { busy: false, waiters: [] };
      this.lines.set(key, line);
    }
    if (!line.busy) {
      line.busy = true;
      return Promise.resolve();
    }
    const waiters = line.waiters;
    return new Promise<void>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const quit = (err: unknown) => {
        const at = waiters.indexOf(waiter);
        if (at >= 0) waiters.splice(at, 1);
        done();
        reject(err);
      };
      const waiter: Waiter = {
        resolve: () => {
          done();
          resolve();
        },
        reject: quit,
      };
      const onAbort = () => quit(signal!.reason);
      const timer = setTimeout(() => quit(this.timedOut(waitMs)), waitMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      waiters.push(waiter);
    });
  }

  /** Whether a caller of `key` has its turn now: one entering would wait. */
  busy(key: string): boolean {
    return this.lines.get(key)?.busy ?? false;
  }

  /** Callers of `key` waiting behind the current one. */
  waiting(key: string): number {
    return this.lines.get(key)?.waiters.length ?? 0;
  }

  /** Ends the current caller's turn: the next in line goes. */
  leave(key: string): void {
    const line = this.lines.get(key);
    if (!line) return;
    const next = line.waiters.shift();
    if (next) next.resolve();
    else this.lines.delete(key);
  }
}
