import { VerifiedTokens } from './verified-tokens';

describe('VerifiedTokens', () => {
  const t0 = 1_800_000_000_000;

  it('answers a cached token with its sub until its exp, then says expired and forgets it', () => {
    const cache = new VerifiedTokens(10, 60_000);
    cache.set('token-a', 'alice', t0 + 5_000, t0);
    expect(cache.get('token-a', t0 + 4_999)).toBe('alice');
    expect(cache.get('token-b', t0)).toBeUndefined();
    expect(cache.get('token-a', t0 + 5_000)).toBe('expired');
    expect(cache.get('token-a', t0 + 5_000)).toBeUndefined();
  });

  it('drops an entry due a recheck, so a withdrawn key stops counting', () => {
    const cache = new VerifiedTokens(10, 60_000);
    cache.set('token-a', 'alice', t0 + 3_600_000, t0);
    expect(cache.get('token-a', t0 + 59_999)).toBe('alice');
    expect(cache.get('token-a', t0 + 60_000)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('keeps at most its bound, the oldest going first', () => {
    const cache = new VerifiedTokens(3, 60_000);
    for (const n of [1, 2, 3, 4]) cache.set(`token-${n}`, `u${n}`, t0 + 60_000, t0);
    expect(cache.size).toBe(3);
    expect(cache.get('token-1', t0)).toBeUndefined();
    expect(cache.get('token-4', t0)).toBe('u4');
  });
});
