/**
 * Fault injection for the tests that prove how each classic mistake fails: pause
 * or crash a lock at a named step, or skew its clock. Production wiring
 * (LocksModule) never passes one; only tests construct strategies with it.
 */
export interface LockFaults {
  /** Called at each named step; may wait (a GC pause, SIGSTOP) or throw (a crash). */
  readonly at?: (step: string) => void | Promise<void>;
  /** The clock the strategy reads; only the expiry-timestamp recipe trusts one. */
  readonly now?: () => number;
}
