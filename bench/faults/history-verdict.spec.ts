import { KeyLayout } from '../../src/redis/key-layout';
import { useTestRedis } from '../../test/helpers/redis';
import { checkHistory } from '../history/check';
import { historyNow } from '../history/clock';
import type { History, LogEntry, RequestRecord } from '../history/history';
import { clockAtStart, historyProblems, judgeHistory, requestsOf } from './history-verdict';
import type { LoadResult } from '../load';

/** What a fault line's promise makes of the checker's report: hand-made histories, judged for real. */

const order = (ms: number, orderId: string, userId: string): LogEntry => ({
  id: `${ms}-0`,
  ms,
  kind: 'order',
  orderId,
  userId,
  quantity: 1,
});
const created = (userId: string, sentAt: number, answeredAt: number, orderId: string): RequestRecord => ({
  userId,
  quantity: 1,
  sentAt,
  answeredAt,
  status: 201,
  code: 'CREATED',
  orderId,
});
const sale = (over: Partial<History>): History => ({
  productId: 'p',
  stock: 1,
  perUserLimit: 1,
  log: [order(10, 'o1', 'u1')],
  logComplete: true,
  requests: [created('u1', 9, 11, 'o1')],
  clock: { offsetMs: 0, uncertaintyMs: 0 },
  ...over,
});
/** Two holders each sold the one unit: held 2 of 1 at ms 12. */
const oversold = sale({
  log: [order(10, 'o1', 'u1'), order(12, 'o2', 'u2')],
  requests: [created('u1', 9, 11, 'o1'), created('u2', 11, 13, 'o2')],
});

describe('historyProblems: a fault line judged by its promise', () => {
  it('a history that holds breaks nothing', () => {
    expect(historyProblems(checkHistory(sale({})), {})).toEqual([]);
  });

  it('a covered check that fails breaks the line, saying which and what was found', () => {
    const problems = historyProblems(checkHistory(oversold), {});
    expect(problems).toEqual([expect.stringMatching(/^history: oversell failed ×1 \(.*o2/)]);
  });

  it("a lesson's check must fail: shown, the line holds; not shown, the line fails", () => {
    expect(historyProblems(checkHistory(oversold), { lessons: ['oversell'] })).toEqual([]);
    expect(historyProblems(checkHistory(sale({})), { lessons: ['oversell'] })).toEqual([
      "history: oversell pass, but its failure is this line's lesson",
    ]);
  });

  it('a check not proven breaks the line unless the scenario says why it cannot be proven', () => {
    // A trimmed log: the checks that need the whole of it are not proven.
    const trimmed = checkHistory(sale({ logComplete: false }));
    expect(trimmed.checks.oversell).toBe('not proven');
    expect(historyProblems(trimmed, {})).toContainEqual(expect.stringMatching(/^history: oversell not proven \(/));
    const why = Object.fromEntries(
      ['oversell', 'perUserLimit', 'falseRefusals', 'outsideWrites', 'returns', 'ordersOnce', 'totalQueue'].map((c) => [
        c,
        'trimmed',
      ]),
    );
    expect(historyProblems(trimmed, { unprovable: why })).toEqual([]);
  });

  it('a fail is a fail even where not proven was allowed', () => {
    expect(historyProblems(checkHistory(oversold), { unprovable: { oversell: 'allowed' } })).toHaveLength(1);
  });
});

describe('requestsOf', () => {
  it("takes every load's requests, a killed app's unanswered ones included, and refuses a load that kept none", () => {
    const unanswered: RequestRecord = {
      userId: 'k',
      quantity: 1,
      sentAt: 5,
      answeredAt: null,
      status: null,
      code: null,
    };
    const load = (requests?: RequestRecord[]) => ({ requests }) as unknown as LoadResult;
    expect(requestsOf([load([created('u1', 9, 11, 'o1')]), load([unanswered])])).toEqual([
      created('u1', 9, 11, 'o1'),
      unanswered,
    ]);
    expect(() => requestsOf([load([]), load(undefined)])).toThrow(/1 loads kept no requests/);
  });
});

describe('judgeHistory: a product in escrow buckets is one sale over every bucket', () => {
  const redis = useTestRedis();

  /**
   * What reset-sale-10.lua and the purchases leave of `shares.length` buckets, by hand:
   * bucket 0's meta lists the others, each bucket its share of the stock, and each
   * order in its buyer's home bucket's log (XADD stamps it with Redis's clock).
   */
  async function bucketed(prefix: string, shares: number[], orders: [bucket: number, userId: string][]) {
    const client = redis.client();
    const keys = new KeyLayout(prefix);
    const ids = shares.map((_, b) => (b === 0 ? 'hot' : `hot~${b}`));
    const start = await clockAtStart(client);
    for (const [b, share] of shares.entries()) {
      const more = b === 0 ? ['buckets', ids.slice(1).join(' ')] : [];
      await client.hset(keys.product(ids[b]).meta, 'initialStock', share, 'perUserLimit', 1, ...more);
    }
    const requests: RequestRecord[] = [];
    for (const [i, [b, userId]] of orders.entries()) {
      const sentAt = historyNow();
      const orderId = `o${i}`;
      await client.xadd(keys.product(ids[b]).orders, '*', 'orderId', orderId, 'userId', userId, 'quantity', '1');
      requests.push({ ...created(userId, sentAt, historyNow(), orderId), productId: 'hot' });
    }
    return judgeHistory(client, keys.product('hot'), requests, { start });
  }

  it("reads every bucket's log: an order acknowledged from another bucket is in the history", async () => {
    const judged = await bucketed(
      'hv-two:',
      [1, 1],
      [
        [0, 'u1'],
        [1, 'u2'],
      ],
    );
    expect(judged.problems).toEqual([]);
    expect(judged.report).toMatchObject({ stock: 2, orders: 2, peak: { units: 2 } });
  });

  it("holds the buckets' orders against the product's one stock: units beyond it are an oversell", async () => {
    const judged = await bucketed(
      'hv-over:',
      [1, 1],
      [
        [0, 'u1'],
        [1, 'u2'],
        [1, 'u3'],
      ],
    );
    expect(judged.report.checks.oversell).toBe('fail');
    expect(judged.problems).toContainEqual(expect.stringMatching(/^history: oversell failed ×1 /));
  });
});
