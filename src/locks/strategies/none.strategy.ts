import { Hold, Lock, UsingOptions } from '../lock';

/**
 * `none` — no lock at all: the negative control.
 *
 * Every buyer runs read-stock / check / write concurrently, so many read the same
 * "stock > 0" before any of them writes, and all of them decrement: the product is
 * oversold. The bench and the tests run it to prove they can see overselling; it is
 * selectable only with ALLOW_UNSAFE=1.
 */
export class NoLockStrategy implements Lock {
  readonly lostLocks = 0;
  private readonly never: Hold = { signal: new AbortController().signal, assertValid: () => undefined };

  using<T>(_key: string, section: (hold: Hold) => Promise<T>, options?: UsingOptions): Promise<T> {
    options?.signal?.throwIfAborted();
    return section(this.never);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
