import { setMaxListeners } from 'node:events';
import { SoldOutError } from '../../errors/errors';

/**
 * Per product and sale, a signal that fires when this process sees that sale's stock
 * at 0. Buyers waiting their turn listen to it, so once one of them finds the product
 * sold out, the rest answer SOLD_OUT at once instead of each taking its turn to learn
 * it. A 0 seen after they began waiting was true for them too when it was read (stock
 * rises again only when a reservation is cancelled or expires, and a buyer told
 * SOLD_OUT then may try again and buy the returned unit); but only within one sale: a read from before a restart (PUT) saw the last
 * sale's 0, and must not abort the buyers of the new one. So a signal carries the sale
 * id (meta `saleId`) its read saw, and wakes only the waiters of that sale.
 */
export class SoldOutSignals {
  private readonly controllers = new Map<string, AbortController>();

  /** The signal for buyers of `productId` that start waiting now, in the sale they read (`saleId`). */
  signal(productId: string, saleId: string): AbortSignal {
    const id = `${productId}#${saleId}`;
    let controller = this.controllers.get(id);
    if (!controller) {
      controller = new AbortController();
      // One listener per waiting buyer is expected, not a leak.
      setMaxListeners(0, controller.signal);
      this.controllers.set(id, controller);
    }
    return controller.signal;
  }

  /** Wakes this process's waiters of that sale with SOLD_OUT; later buyers start from a fresh signal. */
  soldOut(productId: string, saleId: string): void {
    const id = `${productId}#${saleId}`;
    const controller = this.controllers.get(id);
    if (!controller) return;
    this.controllers.delete(id);
    controller.abort(new SoldOutError(productId));
  }

  /** Wakes the waiters of that sale if `err` says the product is sold out. */
  notice(productId: string, saleId: string, err: unknown): void {
    if (err instanceof SoldOutError) this.soldOut(productId, saleId);
  }
}
