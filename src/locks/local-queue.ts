import { LockTimeoutError } from '../errors/domain-errors';

/**
 * An in-process FIFO per lock key: of all the buyers of one product waiting in this
 * process, only the one at the head contends for the Redis lock; the rest wait here
 * without sending anything. Without it, a thousand waiters each retrying SET NX
 * flood Redis and the client's one connection, and the holder's own commands queue
 * behind the retries: the sale crawls and waiters time out while stock remains.
 *
 * It is only a traffic shaper: mutual exclusion still comes from the Redis lock,
 * across processes and within this one.
 */
export class LocalQueue {
  /** Per key, a promise that settles when the last caller in line has left. */
  private readonly tails = new Map<string, Promise<void>>();

  /**
   * Resolves when it is this caller's turn, with the function to call on leaving.
   * Rejects with LockTimeoutError after `waitMs`, or with the signal's reason when
   * `signal` aborts; either way the caller is out of the line.
   */
  async enter(key: string, waitMs: number, signal?: AbortSignal): Promise<() => void> {
    signal?.throwIfAborted();
    const previous = this.tails.get(key);
    let leave!: () => void;
    const left = new Promise<void>((resolve) => (leave = resolve));
    // Our successor waits for everyone before us as well as for us, so leaving the
    // line early (timeout, abort) never lets it jump ahead of a caller still inside.
    const tail = previous ? previous.then(() => left) : left;
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    if (!previous) return leave;
    try {
      await turn(previous, waitMs, signal);
      return leave;
    } catch (err) {
      leave();
      throw err;
    }
  }
}

function turn(previous: Promise<void>, waitMs: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (err?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (err) reject(err);
      else resolve();
    };
    const onAbort = () => finish(signal!.reason);
    const timer = setTimeout(() => finish(new LockTimeoutError(waitMs)), waitMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    void previous.then(() => finish());
  });
}
