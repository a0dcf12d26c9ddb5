/**
 * How a CLI of the bench's (scripts/bench.js, scripts/faults.js) ends: with everything
 * it started stopped (harness/processes.ts stopAll) when it is done, when it fails,
 * and on SIGINT or SIGTERM, where a second signal (Ctrl-C pressed twice) is the same
 * stop, not a reason to skip its clean-up.
 */
import { stopAll } from '../harness/processes';

export interface Ending {
  /** Says that a signal stops the run. */
  readonly onSignal?: (signal: NodeJS.Signals) => void;
  /** Says why the run failed, and gives its exit code. */
  readonly failed: (err: Error) => number;
  /**
   * A failure after a signal is what was in flight when the signal stopped the apps
   * and Redis (a closed connection): left unsaid, the signal's handler exits with its own code.
   */
  readonly quietAfterSignal?: boolean;
}

/** Runs `main`, then stops everything it started and exits with its code. */
export function runToExit(main: () => Promise<number>, { onSignal, failed, quietAfterSignal = false }: Ending): void {
  let stopping = false;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      onSignal?.(signal);
      void stopAll().finally(() => process.exit(130));
    });
  }
  main().then(
    async (code) => {
      await stopAll();
      process.exit(code);
    },
    async (err: Error) => {
      if (stopping && quietAfterSignal) return;
      const code = failed(err);
      await stopAll();
      process.exit(code);
    },
  );
}
