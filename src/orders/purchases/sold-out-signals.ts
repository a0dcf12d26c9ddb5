import { setMaxListeners } from 'node:events';
import { SoldOutError } from '../../errors/errors';

/**
 * Per product, a signal that fires when this process sees its stock at 0. Buyers
 * waiting their turn listen to it, so once one of them finds the product sold out,
 * the rest answer SOLD_OUT at once instead of each taking its turn to learn it.
 * Stock only falls during a sale, so a 0 seen after they began waiting is true for
 * them too.
 */
export class SoldOutSignals {
  private readonly controllers = new Map<string, AbortController>();

  /** The signal for buyers of `productId` that start waiting now. */
  signal(productId: string): AbortSignal {
    let controller = this.controllers.get(productId);
    if (!controller) {
      controller = new AbortController();
      // One listener per waiting buyer is expected, not a leak.
      setMaxListeners(0, controller.signal);
      this.controllers.set(productId, controller);
    }
    return controller.signal;
  }

  /** Wakes this process's waiters with SOLD_OUT; later buyers start from a fresh signal. */
  soldOut(productId: string): void {
    const controller = this.controllers.get(productId);
    if (!controller) return;
    this.controllers.delete(productId);
    controller.abort(new SoldOutError(productId));
  }

  /** Wakes the product's waiters if `err` says the product is sold out. */
  notice(productId: string, err: unknown): void {
    if (err instanceof SoldOutError) this.soldOut(productId);
  }
}
