import { SoldOutError } from '../../errors/errors';
import { SoldOutSignals } from './sold-out-signals';

describe('SoldOutSignals', () => {
  it('wakes the waiters of the sale whose 0 was read, with SOLD_OUT, and only them', () => {
    const signals = new SoldOutSignals();
    const lastSale = signals.signal('phone', '1');
    const newSale = signals.signal('phone', '2');
    const otherProduct = signals.signal('cable', '1');
    // A read from before the restart (PUT) saw sale 1 sold out; it reaches here late.
    signals.notice('phone', '1', new SoldOutError('phone'));
    expect(lastSale.aborted).toBe(true);
    expect(lastSale.reason).toBeInstanceOf(SoldOutError);
    // The new sale's buyers keep waiting: its stock was never seen at 0.
    expect(newSale.aborted).toBe(false);
    expect(otherProduct.aborted).toBe(false);
    signals.soldOut('phone', '2');
    expect(newSale.aborted).toBe(true);
  });

  it('ignores what is not SOLD_OUT, and starts a fresh signal after one fired', () => {
    const signals = new SoldOutSignals();
    const waiting = signals.signal('phone', '3');
    signals.notice('phone', '3', new Error('LIMIT_REACHED'));
    expect(waiting.aborted).toBe(false);
    signals.soldOut('phone', '3');
    expect(signals.signal('phone', '3').aborted).toBe(false);
  });
});
