/**
 * A distributed lock on a key, as node-redlock's `using` and redis-semaphore's
 * `Lock` shape it: the caller hands over a section, the lock runs it while held and
 * releases whatever the section did. A lock knows nothing of what the section does:
 * orders/ decides what a purchase writes under it.
 */

/** What a section running under the lock gets. */
export interface Hold {
  /**
   * Aborts once the hold can no longer be trusted (its validity ran out, a watchdog
   * renewal found it gone): a section checks it right before it writes.
   */
  readonly signal: AbortSignal;
  /**
   * Throws LockExpiredError unless the hold is still valid *by the clock* (its
   * validity ends at acquisition + TTL - drift, or the last watchdog renewal's), or
   * the signal's reason if it aborted. The signal is a timer, and a timer cannot fire
   * while the process is busy or paused: a section calls this right before it writes.
   */
  assertValid(): void;
  /** The fencing token of this acquisition, for a lock that issues one: the write must present it to Redis. */
  readonly fence?: number;
  /**
   * The reply of `options.readAtAcquire`, for a lock that takes it in the step that takes
   * the lock (`fenced`): a read under the lock, so the section need not read again.
   * Absent for a lock that cannot (the section reads itself).
   */
  readonly read?: readonly unknown[];
}

/** UsingOptions.readAtAcquire: a read's arguments, opaque to the lock. */
export type ReadAtAcquire = readonly (string | number)[];

export interface UsingOptions {
  /** Abort to stop waiting for the lock (the product sold out meanwhile): rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /**
   * performance.now() by which the lock must be held (LockTimeoutError after); default:
   * now + the wait budget. Every duration the app measures is on this monotonic clock:
   * a wall clock stepped back (NTP, an operator) would stretch a lease's validity and
   * a deadline, and turn assertValid()'s clock check off for as long as the step.
   */
  readonly deadline?: number;
  /**
   * Called once, at most, as soon as the lock turns out not to be free at once (another
   * caller holds it, in this process or another): the caller may do then what is only
   * worth doing while it waits (the batch's unlocked read, whose refusals need not wait).
   */
  readonly onWait?: () => void;
  /**
   * The arguments of a read to take in the step that takes the lock, for a lock that can
   * (`fenced`: fenced-acquire-6.lua's ARGV[3..]; its reply is hold.read). Built by the
   * caller, which knows what it reads (orders/sale-store.ts); the lock passes them on
   * unread. A lock that cannot ignores them, and its section reads for itself.
   */
  readonly readAtAcquire?: ReadAtAcquire;
}

/** For a lock on nodes of its own (Redlock): how many answer PING, and how many a lock needs. */
export interface LockNodes {
  readonly up: number;
  readonly total: number;
  readonly quorum: number;
}

/** The configured lock (an abstract class, so it is its own injection token). */
export abstract class Lock {
  /** Holds found lost (expired, renewal failed, released by someone else, a fenced write refused); each is logged. */
  abstract readonly lostLocks: number;

  /**
   * Runs `section` while holding the lock on `key`, then releases it, whatever the
   * section did. Throws LockTimeoutError if the lock is not obtained in time; an
   * abort of `options.signal` before it is held rejects with the signal's reason.
   */
  abstract using<T>(key: string, section: (hold: Hold) => Promise<T>, options?: UsingOptions): Promise<T>;

  /** Closes connections of its own. */
  abstract close(): Promise<void>;

  /** Lock nodes of its own, for /health (Redlock only). */
  nodes?(): Promise<LockNodes>;
}
