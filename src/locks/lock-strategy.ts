import type { OrderRequest } from '../orders/sale-rules';
import type { ProductKeys } from '../redis/key-layout';

/**
 * A lock: how a purchase gets exclusive access to a product. The critical section
 * (read stock, check, write) is the orders service's; a lock strategy only decides
 * what "exclusive" means, so every lock runs the very same purchase code and the
 * difference the bench and tests see is the lock's alone.
 */
export interface LockStrategy {
  readonly kind: 'lock';
  /** The LOCK_STRATEGY value that selects it. */
  readonly name: string;
  /** True for the deliberately broken strategies: they can oversell. */
  readonly unsafe: boolean;
  /** The same owner (async context) may take it again while holding it. */
  readonly reentrant: boolean;
  /**
   * One hold may serve a batch of this process's buyers (lock coalescing, see
   * orders/order-batches.ts). False keeps one hold per buyer: the classic mistakes
   * stay as naive as they are, and `reentrant` shows its nesting per buyer.
   */
  readonly coalesces: boolean;
  /** Holds that were found lost (expired, renewal failed, released by someone else); logged as they happen. */
  readonly lostLocks: number;
  /**
   * Runs `criticalSection` while holding the lock on `lockKey`, then releases it,
   * whatever the section did. Throws LockTimeoutError if the lock is not obtained
   * within the wait budget. `signal` aborts when the hold can no longer be trusted
   * (its TTL is running out); the section checks it right before it writes.
   * `options.signal` lets the caller stop waiting: an abort while the lock is not
   * yet held rejects with the signal's reason and leaves the lock alone.
   * A fenced lock also hands the section its fencing token, which the section's
   * write must present to Redis (fenced-write.lua).
   */
  withLock<T>(
    lockKey: string,
    criticalSection: (signal: AbortSignal, fence?: number) => Promise<T>,
    options?: WithLockOptions,
  ): Promise<T>;
  /** Closes connections of its own, if any. */
  close?(): Promise<void>;
  /** For locks on nodes of their own (Redlock): how many answer PING, and how many a lock needs. */
  lockNodes?(): Promise<LockNodes>;
}

export interface LockNodes {
  readonly up: number;
  readonly total: number;
  readonly quorum: number;
}

export interface WithLockOptions {
  /** Abort to give up waiting for the lock (for example: the product sold out meanwhile). */
  readonly signal?: AbortSignal;
  /** Date.now() by which the lock must be held (LockTimeoutError after); default: now + the wait budget. */
  readonly deadline?: number;
}

/**
 * A lock-free baseline: the whole purchase (check and write) is one atomic Redis
 * operation, so there is no critical section to protect.
 */
export interface LockFreeStrategy {
  readonly kind: 'lock-free';
  readonly name: string;
  readonly unsafe: false;
  readonly reentrant: false;
  readonly lostLocks: 0;
  /**
   * Checks the sale's rules and, if they allow it, records the order `orderId`
   * atomically. Returns the stock left; throws the domain error that applies.
   * `signal` aborts a purchase still waiting to try (the product sold out meanwhile).
   */
  purchase(k: ProductKeys, order: OrderRequest, orderId: string, signal?: AbortSignal): Promise<number>;
  /** Closes connections of its own, if any. */
  close?(): Promise<void>;
}

/** What LOCK_STRATEGY selects. */
export type PurchaseStrategy = LockStrategy | LockFreeStrategy;

/** Injection token for the configured PurchaseStrategy. */
export const LOCK_STRATEGY = Symbol('LOCK_STRATEGY');
