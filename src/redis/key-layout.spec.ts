import { KeyLayout, productIdOf, productKeysOf } from './key-layout';

describe('KeyLayout', () => {
  it('puts every key of a product under the prefix and one hash tag', () => {
    const keys = new KeyLayout('seckill:').product('sku-1');
    expect(keys).toEqual({
      stock: 'seckill:{p:sku-1}:stock',
      meta: 'seckill:{p:sku-1}:meta',
      lock: 'seckill:{p:sku-1}:lock',
      fence: 'seckill:{p:sku-1}:fence',
      buyers: 'seckill:{p:sku-1}:buyers',
      orders: 'seckill:{p:sku-1}:orders',
      idem: 'seckill:{p:sku-1}:idem',
      replicated: 'seckill:{p:sku-1}:replicated',
      live: 'seckill:{p:sku-1}:live',
      states: 'seckill:{p:sku-1}:states',
      deadlines: 'seckill:{p:sku-1}:deadlines',
      queue: 'seckill:{p:sku-1}:queue',
      admitted: 'seckill:{p:sku-1}:admitted',
      moves: 'seckill:{p:sku-1}:moves',
      admin: 'seckill:{p:sku-1}:admin',
      landed: 'seckill:{p:sku-1}:landed',
    });
    // Redis Cluster hashes only the text between the first { and the next }.
    const tags = Object.values(keys).map((k) => k.slice(k.indexOf('{') + 1, k.indexOf('}')));
    expect(new Set(tags)).toEqual(new Set(['p:sku-1']));
  });

  it("reads a product's keys back from any one of them, and nothing from another key", () => {
    const keys = new KeyLayout('seckill:').product('sku-1');
    expect(productKeysOf(keys.lock)).toEqual(keys);
    expect(productIdOf(keys.stock)).toBe('sku-1');
    expect(productIdOf('seckill:products')).toBeNull();
    expect(() => productKeysOf('seckill:products')).toThrow('not a product key: seckill:products');
  });

  it("names each shard's marks by its tag, and gives a product's scripts the guess it is made with", () => {
    const layout = new KeyLayout('x:', (id) => (id === 'a' ? '3' : ''));
    expect(layout.marks('7yb')).toEqual({ settle: 'x:{w:7yb}:settle', due: 'x:{w:7yb}:due' });
    expect(layout.product('a').marksGuess).toBe('3');
    expect(layout.product('b').marksGuess).toBe('');
    expect(Object.values(layout.product('a'))).not.toContain('3');
  });

  it('keeps products apart', () => {
    const layout = new KeyLayout('x:');
    expect(layout.product('a').stock).not.toBe(layout.product('b').stock);
  });
});
