import { LockStrategy, WithLockOptions } from '../lock-strategy';

/**
 * `none` — no lock at all: the negative control.
 *
 * Every buyer runs read-stock / check / write concurrently, so many read the same
 * "stock > 0" before any of them writes, and all of them decrement: the product is
 * oversold. The bench and the tests run it to prove they can see overselling; it is
 * selectable only with ALLOW_UNSAFE=1.
 */
export class NoLockStrategy implements LockStrategy {
  readonly kind = 'lock';
  readonly name = 'none';
  readonly unsafe = true;
  readonly reentrant = false;
  readonly coalesces = false;
  readonly lostLocks = 0;
  private readonly never = new AbortController().signal;

  withLock<T>(
    _lockKey: string,
    criticalSection: (signal: AbortSignal) => Promise<T>,
    options?: WithLockOptions,
  ): Promise<T> {
    options?.signal?.throwIfAborted();
    return criticalSection(this.never);
  }
}
