import { Logger } from '@nestjs/common';

/**
 * Undoes a lock acquisition whose outcome is unknown. A command that failed without
 * a reply (it timed out, the connection dropped) may still run in Redis: the lock is
 * then ours, nobody will release it, and every other buyer waits out its TTL. The
 * undo is a compare-and-delete of our own token, harmless if the acquisition never
 * ran or lost to another owner, so it is sent on any failure. Sent on the same
 * connection, it runs right after the acquisition if that runs at all.
 *
 * Fire and forget: the buyer's answer does not wait for it. If it cannot be sent,
 * the TTL frees the lock, as before. Failures are logged once per streak (Redis
 * being away fails every undo; the client already reports the outage).
 */
export class BestEffortUndo {
  private failing = false;

  constructor(private readonly logger: Logger) {}

  fire(what: string, undo: () => Promise<unknown>): void {
    undo().then(
      () => (this.failing = false),
      (err: Error) => {
        if (this.failing) return;
        this.failing = true;
        this.logger.warn(
          `could not undo ${what}; its TTL will free it: ${err.message} (logged once until an undo works)`,
        );
      },
    );
  }
}
