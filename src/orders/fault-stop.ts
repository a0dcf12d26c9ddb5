import type { FaultPoint, FaultStop as FaultStopConfig } from '../settings/lessons.config';

/**
 * FAULT_STOP_AT, for the fault suite only (the config accepts it only with
 * ALLOW_UNSAFE=1): the process stops itself with a real SIGSTOP the nth time a
 * purchase reaches the named point, and goes on from exactly there when the suite
 * sends SIGCONT. So the suite freezes a lock holder at the moment a pause does harm
 * (its validity checked, its write not yet sent) instead of hunting for it.
 */
export class FaultStop {
  private seen = 0;

  constructor(
    private readonly at: FaultStopConfig | null,
    private readonly stop: () => void = () => process.kill(process.pid, 'SIGSTOP'),
  ) {}

  /** Whether the hook is set for `point` (a caller may then take a slower, stoppable path). */
  armed(point: FaultPoint): boolean {
    return this.at?.point === point;
  }

  /** Called by the purchase paths at each named point; does nothing unless armed for it. */
  reached(point: FaultPoint): void {
    if (this.at?.point !== point || ++this.seen !== this.at.nth) return;
    // Written straight to stderr (synchronous on a pipe): the line is out before the stop.
    process.stderr.write(`FAULT_STOP_AT=${point}:${this.at.nth}: pid ${process.pid} stops itself (SIGSTOP) here\n`);
    this.stop();
  }
}
