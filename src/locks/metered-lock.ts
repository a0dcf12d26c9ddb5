import { LockTimeoutError } from '../errors/errors';
import type { LockWaitOutcome } from '../telemetry/metrics';
import { Hold, Lock, LockNodes, UsingOptions } from './lock';

/** Where a metered lock reports (telemetry's Metrics). */
export interface LockTimings {
  lockWaited(seconds: number, outcome: LockWaitOutcome): void;
  lockHeld(seconds: number): void;
}

/**
 * The configured lock, timed: how long each `using` waited for the lock and how the
 * wait ended, and how long it held it (to the end of its release). Every wait is
 * recorded, those that never got the lock too: they are the ones that pile up when
 * buyers hear LOCK_TIMEOUT. Everything else passes through, so callers cannot tell it
 * from the lock it wraps. Per `using`, not per buyer: a batch of buyers waits once.
 */
export class MeteredLock implements Lock {
  constructor(
    private readonly inner: Lock,
    private readonly timings: LockTimings,
  ) {
    if (inner.nodes) this.nodes = () => inner.nodes!();
  }

  /** Redlock's nodes, when the wrapped lock has them (/health reads them). */
  readonly nodes?: () => Promise<LockNodes>;

  get lostLocks(): number {
    return this.inner.lostLocks;
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  async using<T>(key: string, section: (hold: Hold) => Promise<T>, options?: UsingOptions): Promise<T> {
    const asked = performance.now();
    let held = 0;
    try {
      return await this.inner.using(
        key,
        (hold) => {
          held = performance.now();
          this.timings.lockWaited((held - asked) / 1000, 'acquired');
          return section(hold);
        },
        options,
      );
    } catch (err) {
      // Never held: the wait ended with this error. (Once held, an error is the section's
      // or the release's, and the wait was recorded as acquired.)
      if (held === 0) this.timings.lockWaited((performance.now() - asked) / 1000, waitOutcome(err, options));
      throw err;
    } finally {
      if (held > 0) this.timings.lockHeld((performance.now() - held) / 1000);
    }
  }
}

/** How a wait that did not get the lock ended: the lock rejects an abort with the signal's own reason. */
function waitOutcome(err: unknown, options?: UsingOptions): LockWaitOutcome {
  if (err instanceof LockTimeoutError) return 'timeout';
  if (options?.signal?.aborted && err === options.signal.reason) return 'aborted';
  return 'error';
}
