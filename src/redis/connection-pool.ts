import type { Redis } from 'ioredis';

/**
 * A few dedicated connections, each lent to one caller at a time. WATCH belongs to
 * a connection, not to a command: on a shared connection one buyer's WATCH/EXEC
 * would watch (and abort on) every other buyer's writes. Borrowing a connection
 * for the whole WATCH ... EXEC keeps each optimistic attempt to itself.
 */
export class ConnectionPool {
  private readonly idle: Redis[] = [];
  private readonly waiters: ((c: Redis) => void)[] = [];
  private created = 0;
  private closed = false;

  constructor(
    private readonly create: () => Redis,
    private readonly max: number,
  ) {}

  /**
   * Runs `fn` with a connection of its own; waits for one until `deadline`
   * (performance.now()), then rejects with `timedOut()`.
   */
  async use<T>(deadline: number, timedOut: () => Error, fn: (connection: Redis) => Promise<T>): Promise<T> {
    const connection = await this.take(deadline, timedOut);
    try {
      // Lent only once connected: the connections have no offline queue, which would
      // send a command that already timed out once the connection comes back.
      await ready(connection, deadline, timedOut);
      return await fn(connection);
    } finally {
      this.give(connection);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.idle.splice(0).map((c) => c.quit().catch(() => c.disconnect())));
  }

  private take(deadline: number, timedOut: () => Error): Promise<Redis> {
    // An idle connection may have ended meanwhile (its node went away, and it does not
    // reconnect): it would never become ready again, so it is dropped, not lent.
    for (let idle = this.idle.pop(); idle; idle = this.idle.pop()) {
      if (idle.status !== 'end') return Promise.resolve(idle);
      this.created--;
    }
    if (this.created < this.max) {
      this.created++;
      return Promise.resolve(this.create());
    }
    return new Promise((resolve, reject) => {
      const waiter = (c: Redis) => {
        clearTimeout(timer);
        resolve(c);
      };
      const timer = setTimeout(
        () => {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          reject(timedOut());
        },
        Math.max(0, deadline - performance.now()),
      );
      this.waiters.push(waiter);
    });
  }

  private give(connection: Redis): void {
    if (this.closed || connection.status === 'end') {
      this.created--;
      if (connection.status !== 'end') void connection.quit().catch(() => connection.disconnect());
      // The place it held is free: a caller waiting for one gets a new connection now.
      const next = this.closed ? undefined : this.waiters.shift();
      if (next) {
        this.created++;
        next(this.create());
      }
      return;
    }
    const next = this.waiters.shift();
    if (next) next(connection);
    else this.idle.push(connection);
  }
}

/** Resolves once `connection` is ready; rejects with `timedOut()` at `deadline`, or if it ends. */
function ready(connection: Redis, deadline: number, timedOut: () => Error): Promise<void> {
  if (connection.status === 'ready') return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const done = (err?: Error) => {
      clearTimeout(timer);
      connection.off('ready', onReady).off('end', onEnd);
      if (err) reject(err);
      else resolve();
    };
    const onReady = () => done();
    const onEnd = () => done(timedOut());
    const timer = setTimeout(() => done(timedOut()), Math.max(0, deadline - performance.now()));
    connection.on('ready', onReady).on('end', onEnd);
  });
}
