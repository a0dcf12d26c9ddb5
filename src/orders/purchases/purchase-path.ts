import type { Lock, LockNodes } from '../../locks/lock';
import type { KeyLayout } from '../../redis/key-layout';
import type { Order, OrderRequest } from '../order';

/** What /health reports of the purchase path. */
export interface PurchaseStatus {
  /** Holds found lost (0 for a lock-free path). */
  readonly lostLocks: number;
  /** Redlock's nodes, when the lock has nodes of its own. */
  readonly lockNodes?: LockNodes;
}

/**
 * One way to make a purchase, chosen once when OrdersModule starts (LOCK_STRATEGY):
 * batched under a lock, one buyer per hold (re-entering the lock to record the order
 * under `reentrant`), one Lua script, or WATCH/MULTI. Callers
 * (Checkout, the products service, /health) never ask which one runs.
 * (An abstract class, so it is its own injection token.)
 */
export abstract class PurchasePath {
  /** Writes the order if the sale's rules allow it, or throws the refusal (AppError). */
  abstract purchase(order: OrderRequest): Promise<Order>;

  /**
   * Runs `fn` (a sale reset, an escrow move's first step) while no purchase of
   * `productId` is between its read and its write, so none can land in the new sale with
   * a decision made in the old one. Under `fenced`, `fn` is given the hold's fencing
   * token, which its script checks as a write does.
   */
  abstract exclusive<T>(productId: string, fn: (fence?: number) => Promise<T>): Promise<T>;

  abstract status(): Promise<PurchaseStatus>;
}

/** What the paths that run under a lock share: a reset takes the product's lock too. */
export abstract class LockedPurchases extends PurchasePath {
  constructor(
    protected readonly lock: Lock,
    protected readonly keys: KeyLayout,
    /** strategyFamily() of LOCK_STRATEGY: a sale started by another family is refused. */
    protected readonly family: string,
  ) {
    super();
  }

  exclusive<T>(productId: string, fn: (fence?: number) => Promise<T>): Promise<T> {
    return this.lock.using(this.keys.product(productId).lock, (hold) => fn(hold.fence));
  }

  async status(): Promise<PurchaseStatus> {
    const lockNodes = await this.lock.nodes?.();
    return { lostLocks: this.lock.lostLocks, ...(lockNodes ? { lockNodes } : {}) };
  }
}
