/**
 * How a purchase gets exclusive access to a product. The critical section (read
 * stock, check, write) is the orders service's; a strategy only decides what
 * "exclusive" means, so every strategy runs the very same purchase code and the
 * difference the bench and tests see is the strategy's alone.
 */
export interface LockStrategy {
  /** The LOCK_STRATEGY value that selects it. */
  readonly name: string;
  /** True for the deliberately broken strategies: they can oversell. */
  readonly unsafe: boolean;
  /** Releases that found the lock no longer ours (the hold outlived its TTL); logged as they happen. */
  readonly lostLocks: number;
  /**
   * Runs `criticalSection` while holding the lock on `lockKey`, then releases it,
   * whatever the section did. Throws LockTimeoutError if the lock is not obtained
   * within the wait budget. `signal` aborts when the hold can no longer be trusted
   * (its TTL is running out); the section checks it right before it writes.
   * `options.signal` lets the caller stop waiting: an abort while the lock is not
   * yet held rejects with the signal's reason and leaves the lock alone.
   */
  withLock<T>(
    lockKey: string,
    criticalSection: (signal: AbortSignal) => Promise<T>,
    options?: WithLockOptions,
  ): Promise<T>;
}

export interface WithLockOptions {
  /** Abort to give up waiting for the lock (for example: the product sold out meanwhile). */
  readonly signal?: AbortSignal;
}

/** Injection token for the configured LockStrategy. */
export const LOCK_STRATEGY = Symbol('LOCK_STRATEGY');
