import { LockTimeoutError } from '../errors/domain-errors';

interface Waiter<T> {
  resolve(baton: T | undefined): void;
  reject(err: unknown): void;
}

interface Line<T> {
  busy: boolean;
  readonly waiters: Waiter<T>[];
}

/**
 * An in-process FIFO per lock key: of all the buyers of one product waiting in this
 * process, only the one at the head contends for the Redis lock; the rest wait here
 * without sending anything. Without it, a thousand waiters each retrying SET NX
 * flood Redis and the client's one connection, and the holder's own commands queue
 * behind the retries: the sale crawls and waiters time out while stock remains.
 *
 * The one leaving may hand a baton (the still-valid lock lease) straight to the
 * next in line. The queue is only a traffic shaper: mutual exclusion comes from the
 * Redis lock, across processes and within this one.
 */
export class LocalQueue<T> {
  private readonly lines = new Map<string, Line<T>>();

  /**
   * Resolves when it is this caller's turn, with the baton its predecessor handed
   * over (undefined if none). Rejects with LockTimeoutError after `waitMs`, or with
   * the signal's reason when `signal` aborts; either way the caller is out of line.
   * Every resolved `enter` must be followed by exactly one `leave`.
   */
  enter(key: string, waitMs: number, signal?: AbortSignal): Promise<T | undefined> {
    signal?.throwIfAborted();
    let line = this.lines.get(key);
    if (!line) {
      line = { busy: false, waiters: [] };
      this.lines.set(key, line);
    }
    if (!line.busy) {
      line.busy = true;
      return Promise.resolve(undefined);
    }
    const waiters = line.waiters;
    return new Promise<T | undefined>((resolve, reject) => {
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
      const waiter: Waiter<T> = {
        resolve: (baton) => {
          done();
          resolve(baton);
        },
        reject: quit,
      };
      const onAbort = () => quit(signal!.reason);
      const timer = setTimeout(() => quit(new LockTimeoutError(waitMs)), waitMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      waiters.push(waiter);
    });
  }

  /** Callers of `key` waiting behind the current one. */
  waiting(key: string): number {
    return this.lines.get(key)?.waiters.length ?? 0;
  }

  /**
   * Ends the current caller's turn. With a baton, hands it to the next in line and
   * returns true; returns false if nobody is waiting, and the baton is then still
   * the caller's to dispose of (release the lock) before leaving without it.
   */
  leave(key: string, baton?: T): boolean {
    const line = this.lines.get(key);
    if (!line) return false;
    const next = line.waiters.shift();
    if (next) {
      next.resolve(baton);
      return true;
    }
    if (baton !== undefined) return false;
    this.lines.delete(key);
    return false;
  }
}
