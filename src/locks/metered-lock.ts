import { Hold, Lock, LockNodes, UsingOptions } from './lock';

/** Where a metered lock reports (telemetry's Metrics). */
export interface LockTimings {
  lockWaited(seconds: number): void;
  lockHeld(seconds: number): void;
}

/**
 * The configured lock, timed: how long each `using` waited for the lock and how long
 * it held it (to the end of its release). Everything else passes through, so callers
 * cannot tell it from the lock it wraps. Per hold, not per buyer: a batch of buyers
 * is one hold.
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
          this.timings.lockWaited((held - asked) / 1000);
          return section(hold);
        },
        options,
      );
    } finally {
      // Not held (a timeout, an abort): only the wait's outcome, an error, says so.
      if (held > 0) this.timings.lockHeld((performance.now() - held) / 1000);
    }
  }
}
