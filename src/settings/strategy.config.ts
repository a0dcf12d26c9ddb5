import { ConfigOf, oneOf, section } from './setting';

/** Correct locks: src/locks/strategies. */
const SAFE_LOCKS = ['lock', 'fenced', 'reentrant', 'redlock'] as const;
/** Purchases that need no lock: one Lua script, WATCH/MULTI/EXEC (src/orders/purchases). */
const LOCK_FREE = ['atomic', 'optimistic'] as const;
/** The negative control and the classic mistakes: they can oversell or lock forever. */
const UNSAFE = [
  'none',
  'setnx-no-ttl',
  'setnx-then-expire',
  'unchecked-del',
  'get-then-del',
  'expiry-timestamp',
] as const;

export const LOCK_STRATEGY_NAMES = [...SAFE_LOCKS, ...LOCK_FREE, ...UNSAFE] as const;
export type LockStrategyName = (typeof LOCK_STRATEGY_NAMES)[number];
/** The strategies that are a lock (src/locks builds them); the rest are lock-free purchases. */
export type LockName = (typeof SAFE_LOCKS)[number] | (typeof UNSAFE)[number];

/**
 * Which strategies may sell one product side by side (a rolling deploy, two versions
 * of the app on one Redis): those whose purchases exclude each other. `lock` and
 * `fenced` take the same SET NX PX lock; `atomic`'s script and `optimistic`'s WATCH
 * see each other's writes. Everything else excludes only its own kind: a lock-free
 * write does not wait for a lock holder, `reentrant`'s lock is a hash where `lock`'s
 * is a string, `redlock`'s lives on nodes of its own, and each mistake is its own.
 * The family that starts a sale is recorded with it; the others refuse that product.
 */
export function strategyFamily(name: LockStrategyName): string {
  if (name === 'lock' || name === 'fenced') return 'lock';
  if (name === 'atomic' || name === 'optimistic') return 'lock-free';
  return name;
}

/** Strategies that run only with ALLOW_UNSAFE=1, logged loudly at boot. */
export const UNSAFE_STRATEGIES: readonly LockStrategyName[] = UNSAFE;

/**
 * The way every purchase is made, read by every floor from the metrics up (so it sits
 * here, under them all, rather than in locks/).
 */
export const STRATEGY_CONFIG = section('strategy', {
  // The default write is one Lua script that Redis runs only if no later lock was
  // issued, so a holder paused past its TTL, or a write delayed or replayed past the
  // next acquisition, changes nothing. `lock` stays the textbook lock whose MULTI
  // nothing checks: it shows that late write (docs/strategies.md).
  lockStrategy: oneOf(
    'LOCK_STRATEGY',
    LOCK_STRATEGY_NAMES,
    'fenced',
    'correct locks `fenced` (the default: Redis refuses a late write), `lock` (the textbook lock, kept to show the late write), `reentrant`, `redlock`; lock-free `atomic`, `optimistic`; unsafe `none`, `setnx-no-ttl`, `setnx-then-expire`, `unchecked-del`, `get-then-del`, `expiry-timestamp` (see [strategies.md](strategies.md))',
  ),
});
export type StrategyConfig = ConfigOf<typeof STRATEGY_CONFIG>;
