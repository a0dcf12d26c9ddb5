import type { LoadResult } from './load';
import { judge, OrderEntry, SaleSnapshot } from './verdict';

const T0 = 1_700_000_000_000;

function order(i: number, quantity = 1, userId = `b${i}`): OrderEntry {
  return { orderId: `o${i}`, userId, quantity, ms: T0 + 10 * (i + 1) };
}

/** A clean sale: stock 3 sold to 3 of 10 buyers, and the load that produced it. */
function cleanSale(): { sale: SaleSnapshot; load: LoadResult } {
  const orders = [order(0), order(1), order(2)];
  return {
    sale: { initialStock: 3, perUserLimit: 1, stockLeft: 0, orders, buyers: { b0: 1, b1: 1, b2: 1 } },
    load: {
      sent: 10,
      status: { '201': 3, '409': 7 },
      codes: { CREATED: 3, SOLD_OUT: 7 },
      errors: 0,
      timeouts: 0,
      orderIds: ['o0', 'o1', 'o2'],
      distinctBuyers: 10,
      startedAt: T0,
      durationMs: 100,
      latency: { p50: 1, p90: 2, p99: 3, max: 4 },
    },
  };
}

describe('judge', () => {
  it('passes a clean sale and reports its figures', () => {
    const { sale, load } = cleanSale();
    const verdict = judge(sale, load, 1);
    expect(verdict.invariants).toEqual({
      noOversell: true,
      noUndersell: true,
      conservation: true,
      perUserLimit: true,
      accounting: true,
      exactlyOnce: true,
    });
    expect(verdict).toMatchObject({ sold: 3, stockLeft: 0, orders: 3, distinctBuyers: 3, oversold: 0, sellOutMs: 30 });
    expect(verdict.salesPerSec).toBe(100);
    expect(verdict.problems).toEqual([]);
  });

  it('flags an oversell, and only that, when the extra sale is recorded consistently', () => {
    const { sale, load } = cleanSale();
    const oversold = { ...sale, stockLeft: -1, orders: [...sale.orders, order(3)], buyers: { ...sale.buyers, b3: 1 } };
    const verdict = judge(oversold, { ...load, status: { '201': 4, '409': 6 }, orderIds: [...load.orderIds, 'o3'] }, 1);
    expect(verdict.invariants).toEqual({
      noOversell: false,
      noUndersell: true,
      conservation: true,
      perUserLimit: true,
      accounting: true,
      exactlyOnce: true,
    });
    expect(verdict.oversold).toBe(1);
    expect(verdict.sold).toBe(4);
  });

  it('flags an undersell: demand above stock but units left', () => {
    const { sale, load } = cleanSale();
    const verdict = judge(
      { ...sale, stockLeft: 1, orders: sale.orders.slice(0, 2), buyers: { b0: 1, b1: 1 } },
      { ...load, status: { '201': 2, '409': 8 }, orderIds: ['o0', 'o1'] },
      1,
    );
    expect(verdict.invariants.noUndersell).toBe(false);
    expect(verdict.invariants.conservation).toBe(true);
  });

  it('does not call it an undersell when demand is below the stock', () => {
    const { sale, load } = cleanSale();
    const verdict = judge({ ...sale, initialStock: 20, stockLeft: 17 }, load, 1);
    expect(verdict.invariants.noUndersell).toBe(true);
  });

  it('flags an acknowledged order that is missing from the stream', () => {
    const { sale, load } = cleanSale();
    const verdict = judge(sale, { ...load, orderIds: ['o0', 'o1', 'lost'] }, 1);
    expect(verdict.invariants.conservation).toBe(false);
    expect(verdict.problems.join()).toContain('1 acknowledged orderIds not in the stream');
  });

  it('flags stock that does not add up with the orders', () => {
    const { sale, load } = cleanSale();
    expect(judge({ ...sale, stockLeft: 1, initialStock: 3 }, load, 1).invariants.conservation).toBe(false);
  });

  it('flags a buyer above the per-user limit', () => {
    const { sale, load } = cleanSale();
    const twice = { ...sale, orders: [order(0), order(1), order(2, 1, 'b0')], buyers: { b0: 2, b1: 1 } };
    const verdict = judge(twice, load, 1);
    expect(verdict.invariants.perUserLimit).toBe(false);
  });

  it('flags a buyers hash that disagrees with the orders', () => {
    const { sale, load } = cleanSale();
    expect(judge({ ...sale, buyers: { b0: 1, b1: 1 } }, load, 1).invariants.perUserLimit).toBe(false);
  });

  it.each([
    ['a 5xx', { status: { '201': 3, '409': 6, '503': 1 } }],
    ['an unanswered request', { sent: 11 }],
    ['a socket error', { errors: 1 }],
    ['a timeout', { timeouts: 1 }],
  ])('flags %s in the accounting', (_case, change) => {
    const { sale, load } = cleanSale();
    expect(judge(sale, { ...load, ...change }, 1).invariants.accounting).toBe(false);
  });

  it('has no sell-out time when the stock never reached 0', () => {
    const { sale, load } = cleanSale();
    const verdict = judge({ ...sale, initialStock: 5, stockLeft: 2 }, { ...load, distinctBuyers: 3 }, 1);
    expect(verdict.sellOutMs).toBeNull();
    expect(verdict.salesPerSec).toBeNull();
  });

  it('flags an order written twice (a replayed write), and one acknowledged but missing, as not exactly once', () => {
    const { sale, load } = cleanSale();
    const twice = { ...sale, orders: [...sale.orders, sale.orders[0]] };
    expect(judge(twice, load, 1).invariants.exactlyOnce).toBe(false);
    const lost = { ...load, orderIds: [...load.orderIds.slice(0, 2), 'never-written'] };
    expect(judge(sale, lost, 1).invariants.exactlyOnce).toBe(false);
    // The same order answered twice (a retry with its Idempotency-Key) is still once.
    const replayed = { ...load, status: { ...load.status, '201': 4 }, orderIds: [...load.orderIds, load.orderIds[0]] };
    expect(judge(sale, replayed, 1).invariants).toMatchObject({ exactlyOnce: true, conservation: true });
  });
});
