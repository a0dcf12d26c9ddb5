import { failedReport, historyReport } from '../test/helpers/history-report';
import type { HistoryReport } from './history/history';
import type { LoadResult } from './load';
import {
  FINDINGS_KEPT,
  judge,
  judgeProducts,
  OrderEntry,
  passes,
  peakOversold,
  ProductVerdict,
  SaleSnapshot,
  withHistories,
  withHistory,
} from './verdict';

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

describe('judgeProducts', () => {
  /** Three clean sales of 3 units, p1..p3, each to its own buyers, and the whole load (30 requests). */
  function threeProducts() {
    const parts = ['p1', 'p2', 'p3'].map((id, n) => {
      const { sale, load } = cleanSale();
      const orders = sale.orders.map((o, i) => ({ ...o, orderId: `${id}-o${i}`, userId: `${id}-b${i}`, ms: o.ms + n }));
      return {
        id,
        sale: { ...sale, orders, buyers: Object.fromEntries(orders.map((o) => [o.userId, 1])) },
        load: { ...load, orderIds: orders.map((o) => o.orderId) },
      };
    });
    const whole = {
      ...cleanSale().load,
      sent: 30,
      status: { '201': 9, '409': 21 },
      orderIds: parts.flatMap((p) => p.load.orderIds),
      distinctBuyers: 30,
    };
    return { parts, whole };
  }

  it('judges each product on its own and the whole as totals', () => {
    const { parts, whole } = threeProducts();
    const { total, products } = judgeProducts(parts, whole, 1);
    expect(products.map((p) => [p.id, p.stock, p.sold, p.stockLeft, passes(p.invariants, false)])).toEqual([
      ['p1', 3, 3, 0, true],
      ['p2', 3, 3, 0, true],
      ['p3', 3, 3, 0, true],
    ]);
    expect(total).toMatchObject({ sold: 9, stockLeft: 0, orders: 9, distinctBuyers: 9, oversold: 0, problems: [] });
    // The whole sold out with its last unit, p3's last order.
    expect(total.sellOutMs).toBe(32);
    expect(passes(total.invariants, false)).toBe(true);
  });

  it('fails the whole when one product oversells, names it, and does not let another undersold product cancel it out', () => {
    const { parts, whole } = threeProducts();
    const extra = { orderId: 'p2-o3', userId: 'p2-b3', quantity: 1, ms: T0 + 50 };
    const p2 = parts[1];
    parts[1] = {
      ...p2,
      sale: {
        ...p2.sale,
        stockLeft: -1,
        orders: [...p2.sale.orders, extra],
        buyers: { ...p2.sale.buyers, 'p2-b3': 1 },
      },
      load: { ...p2.load, status: { '201': 4, '409': 6 }, orderIds: [...p2.load.orderIds, 'p2-o3'] },
    };
    // p3 sold one unit fewer: the totals (9 sold of 9) look right.
    const p3 = parts[2];
    parts[2] = {
      ...p3,
      sale: { ...p3.sale, stockLeft: 1, orders: p3.sale.orders.slice(0, 2), buyers: { 'p3-b0': 1, 'p3-b1': 1 } },
      load: { ...p3.load, status: { '201': 2, '409': 8 }, orderIds: p3.load.orderIds.slice(0, 2) },
    };
    const { total, products } = judgeProducts(parts, { ...whole, orderIds: parts.flatMap((p) => p.load.orderIds) }, 1);
    // The failures really are there, product by product.
    expect(products[1]).toMatchObject({ id: 'p2', oversold: 1, stockLeft: -1 });
    expect(products[1].invariants.noOversell).toBe(false);
    expect(products[2].invariants.noUndersell).toBe(false);
    expect(passes(products[0].invariants, false)).toBe(true);
    // The sums balance, the whole still fails on both counts.
    expect(total).toMatchObject({ sold: 9, stockLeft: 0, oversold: 1 });
    expect(total.invariants).toMatchObject({ noOversell: false, noUndersell: false, conservation: true });
    expect(passes(total.invariants, false)).toBe(false);
    // As a negative control's row it would pass: it showed the failure.
    expect(passes(total.invariants, true)).toBe(true);
    expect(total.problems.filter((line) => /^p2: oversell/.test(line))).toHaveLength(1);
    expect(total.problems.filter((line) => /^p3: undersell/.test(line))).toHaveLength(1);
    expect(total.broken.noOversell).toContain('p2: oversell');
  });
});

/** An oversell of `units` above a stock of 3 peaking at T0 + 40 ms, gone by the end (its extra orders expired). */
function oversoldReport(units: number, findings = 1): HistoryReport {
  return failedReport(
    3,
    { units: 3 + units, ms: T0 + 40 },
    'oversell',
    Array.from({ length: findings }, (_, i) => ({
      ms: T0 + 35 + i,
      orderIds: [`x${i}`],
      detail: `${4 + i} units held of 3 after order x${i}`,
    })),
  );
}

describe('withHistory', () => {
  it('adds the history invariant and keeps the end state’s: a sale whose oversell expired ends whole and still fails', () => {
    const { sale, load } = cleanSale();
    const ended = judge(sale, load, 1);
    const judged = withHistory(ended, oversoldReport(2), T0);
    // Every end-state invariant holds: only the history shows the oversell.
    const { history, ...endState } = judged.invariants;
    expect(endState).toEqual(ended.invariants);
    expect(Object.values(endState).every(Boolean)).toBe(true);
    expect(history).toBe(false);
    expect(passes(judged.invariants, false)).toBe(false);
    // A negative control shows its failure by it.
    expect(passes(judged.invariants, true)).toBe(true);
    expect(judged.broken.history).toBe(
      'history: oversell failed (1); peak 5 units held of 3 at 40 ms; first: oversell: 4 units held of 3 after order x0',
    );
    expect(judged.problems).toEqual([judged.broken.history]);
    expect(judged.history).toMatchObject({ startMs: T0, peak: { units: 5, ms: T0 + 40 }, oversell: { units: 2 } });
    expect(judged.oversold).toBe(0);
  });

  it('holds when every check that ran passed, and a check not run does not break it', () => {
    const { sale, load } = cleanSale();
    const report = historyReport({ checks: { ...historyReport().checks, totalQueue: 'not run' } });
    const judged = withHistory(judge(sale, load, 1), report, T0);
    expect(judged.invariants.history).toBe(true);
    expect(judged.problems).toEqual([]);
    expect(passes(judged.invariants, false)).toBe(true);
  });

  it('fails on a check not proven, and says why', () => {
    const { sale, load } = cleanSale();
    const report = historyReport({
      checks: { ...historyReport().checks, falseRefusals: 'not proven' },
      holds: false,
      notProven: ['the log was trimmed'],
    });
    const judged = withHistory(judge(sale, load, 1), report, T0);
    expect(judged.invariants.history).toBe(false);
    expect(judged.broken.history).toBe('history: falseRefusals not proven; not proven: the log was trimmed');
  });

  it('keeps the first FINDINGS_KEPT findings of each check and every count', () => {
    const { sale, load } = cleanSale();
    const judged = withHistory(judge(sale, load, 1), oversoldReport(2, FINDINGS_KEPT + 5), T0);
    expect(judged.history!.findings).toHaveLength(FINDINGS_KEPT);
    expect(judged.history!.findings.at(-1)!.orderIds).toEqual([`x${FINDINGS_KEPT - 1}`]);
    expect(judged.history!.counts.oversell).toBe(FINDINGS_KEPT + 5);
  });
});

describe('peakOversold', () => {
  it('is the history’s peak above the stock, not the end’s (the demo’s none: 1,339 of 1,000, ended 4 over)', () => {
    const { sale, load } = cleanSale();
    const ended = { ...judge(sale, load, 1), oversold: 4 };
    expect(peakOversold(ended)).toBe(4);
    expect(peakOversold(withHistory(ended, oversoldReport(339), T0))).toBe(339);
    // An oversell gone by the end still counts: the none control is not blind.
    expect(peakOversold(withHistory({ ...ended, oversold: 0 }, oversoldReport(2), T0))).toBe(2);
    expect(peakOversold(withHistory({ ...ended, oversold: 0 }, historyReport(), T0))).toBe(0);
  });
});

describe('withHistories', () => {
  it('gives each product its report, and fails the row naming the product whose history failed', () => {
    const { sale, load } = cleanSale();
    const products = ['p1', 'p2'].map((id): ProductVerdict => ({
      id,
      stock: 3,
      requests: 10,
      status: load.status,
      ...judge(sale, load, 1),
    }));
    const total = judge(sale, load, 1);
    const { verdict, products: judged } = withHistories(
      { verdict: total, products },
      [historyReport({ productId: 'p2' }), { ...oversoldReport(1), productId: 'p1' }],
      T0,
    );
    expect(judged!.map((p) => [p.id, p.invariants.history, p.history?.productId])).toEqual([
      ['p1', false, 'p1'],
      ['p2', true, 'p2'],
    ]);
    expect(verdict.invariants.history).toBe(false);
    expect(verdict.problems).toEqual([`p1: ${judged![0].broken.history}`]);
    expect(peakOversold({ ...verdict, products: judged })).toBe(1);
  });
});
