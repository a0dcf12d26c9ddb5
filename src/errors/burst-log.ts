/**
 * Says the first of a kind of trouble at once, then only counts its repeats for a
 * window and says how many there were in one more line. A Redis that refuses every
 * write (out of memory, say) fails every buyer of a sale; one line per buyer, each
 * written synchronously, would slow the app down exactly when it is already in trouble.
 */
export class BurstLog {
  private readonly bursts = new Map<string, { repeats: number }>();

  constructor(
    private readonly write: (line: string) => void,
    private readonly windowMs = 10_000,
  ) {}

  /** Writes `line` unless a burst of `kind` is under way; then it is only counted. */
  say(kind: string, line: string): void {
    const burst = this.bursts.get(kind);
    if (burst) {
      burst.repeats++;
      return;
    }
    this.write(line);
    const started = { repeats: 0 };
    this.bursts.set(kind, started);
    setTimeout(() => {
      this.bursts.delete(kind);
      if (started.repeats > 0) {
        this.write(
          `${kind}: ${started.repeats} more time${started.repeats === 1 ? '' : 's'} in the ${this.windowMs / 1000} s after: ${line}`,
        );
      }
    }, this.windowMs).unref();
  }
}
