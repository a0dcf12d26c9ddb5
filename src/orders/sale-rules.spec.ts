import { uniquePrefix, useTestRedis } from '../../test/helpers/redis';
import { KeyLayout } from '../redis/key-layout';
import type { OrderRequest } from './order';
import { ScriptedPurchases } from './purchases/scripted.purchases';
import { refusal, SaleState } from './sale-rules';
import { loadConfig } from '../config/app-config';

const CONFIG = loadConfig({
  REDIS_URL: 'redis://unused:1',
  ADMIN_TOKEN: 'a-long-enough-admin-token',
  LOCK_STRATEGY: 'atomic',
});

interface Case {
  readonly state: SaleState | null;
  readonly quantity: number;
  /** The bucket list the order's bucket was chosen from (OrderLine.bucketList); absent: not checked. */
  readonly bucketList?: string;
}

/**
 * Every combination around the edges: limit reached or not, stock 0, short, exact, ample;
 * and a bucket of the order's bucket list or of another (epochs `<list>.<sale>`, '' and a
 * bare one of the version before lists: list ''), the order's own answer otherwise the same.
 */
function cases(): Case[] {
  const out: Case[] = [{ state: null, quantity: 1 }];
  for (const perUserLimit of [1, 2, 5])
    for (const stock of [0, 1, 2, 5])
      for (const bought of [0, 1, 2])
        for (const quantity of [1, 2, 3]) {
          if (bought <= perUserLimit) out.push({ state: { perUserLimit, stock, bought }, quantity });
        }
  for (const [epoch, bucketList] of [
    ['', ''],
    ['L1.s1', 'L1'],
    ['L1.s2', 'L1'],
    ['L2.s1', 'L1'],
    ['L1.s1', ''],
    ['', 'L1'],
    ['L1.s1', undefined],
    ['.s1', ''],
    ['bare-uuid', ''],
    ['bare-uuid', 'bare-uuid'],
  ] as const)
    for (const stock of [0, 2])
      out.push({ state: { perUserLimit: 1, stock, bought: 0, epoch }, quantity: 1, bucketList });
  return out;
}

/**
 * The sale's rules exist twice: once in TypeScript (sale-rules.ts, which every
 * locked path decides with) and once in Lua (purchase-7.lua, the `atomic` path).
 * Both get the same table of states and must give the same answer, to the word.
 */
describe('the sale rules, in TypeScript and in Lua, on the same table of cases', () => {
  const { client } = useTestRedis();

  it.each(cases().map((c) => [JSON.stringify(c), c] as const))(
    '%s',
    async (_label, { state, quantity, bucketList }) => {
      const redis = client();
      const keys = new KeyLayout(uniquePrefix('rules'));
      const order: OrderRequest = { productId: 'p', userId: 'ann', quantity, bucketList };
      const k = keys.product(order.productId);
      if (state) {
        await redis.hset(k.meta, 'initialStock', state.stock, 'perUserLimit', state.perUserLimit);
        if (state.epoch) await redis.hset(k.meta, 'epoch', state.epoch);
        await redis.set(k.stock, state.stock);
        if (state.bought > 0) await redis.hset(k.buyers, order.userId, state.bought);
      }

      const ts = refusal(order, state);
      const lua = await new ScriptedPurchases(redis, keys, CONFIG).purchase(order).then(
        (o) => ({ code: 'OK', remaining: o.remaining }),
        (err: { code: string; message: string }) => ({ code: err.code, message: err.message }),
      );

      expect(lua).toEqual(
        ts ? { code: ts.code, message: ts.message } : { code: 'OK', remaining: state!.stock - quantity },
      );
    },
  );

  it('covers every answer the rules can give', () => {
    const codes = new Set(
      cases().map(
        ({ state, quantity, bucketList }) =>
          refusal({ productId: 'p', userId: 'u', quantity, bucketList }, state)?.code ?? 'OK',
      ),
    );
    expect([...codes].sort()).toEqual([
      'BUCKETS_BUSY',
      'INSUFFICIENT_STOCK',
      'LIMIT_REACHED',
      'OK',
      'SOLD_OUT',
      'UNKNOWN_PRODUCT',
    ]);
  });
});
