import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis, Result } from 'ioredis';

/**
 * The Lua scripts, one .lua file each (nest-cli.json copies them beside the
 * compiled code). ioredis defineCommand sends EVALSHA and falls back to EVAL once
 * after a SCRIPT FLUSH or a restart, so each script is loaded once per server.
 */
const SCRIPTS = {
  releaseLock: { file: 'release-lock.lua', numberOfKeys: 1 },
  resetSale: { file: 'reset-sale.lua', numberOfKeys: 4 },
  purchase: { file: 'purchase.lua', numberOfKeys: 4 },
  reentrantAcquire: { file: 'reentrant-acquire.lua', numberOfKeys: 1 },
  reentrantRelease: { file: 'reentrant-release.lua', numberOfKeys: 1 },
  reentrantRenew: { file: 'reentrant-renew.lua', numberOfKeys: 1 },
  fencedAcquire: { file: 'fenced-acquire.lua', numberOfKeys: 2 },
  fencedWrite: { file: 'fenced-write.lua', numberOfKeys: 5 },
} as const;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    /** release-lock.lua: 1 if our lock was deleted, 0 if it was not ours. */
    releaseLock(lockKey: string, token: string, channel?: string): Result<number, Context>;
    /** reset-sale.lua: (meta, stock, buyers, orders, initialStock, perUserLimit) -> 1. */
    resetSale(
      metaKey: string,
      stockKey: string,
      buyersKey: string,
      ordersKey: string,
      initialStock: number,
      perUserLimit: number,
    ): Result<number, Context>;
    /** purchase.lua: the whole purchase atomically; see the script's header for the replies. */
    purchase(
      metaKey: string,
      stockKey: string,
      buyersKey: string,
      ordersKey: string,
      userId: string,
      quantity: number,
      orderId: string,
    ): Result<[string, ...number[]], Context>;
    /** reentrant-acquire.lua: null when acquired or re-entered, else the PTTL of the other owner's lock. */
    reentrantAcquire(lockKey: string, owner: string, ttlMs: number): Result<number | null, Context>;
    /** reentrant-release.lua: null if not ours, 0 if still held, 1 if now free (and published). */
    reentrantRelease(lockKey: string, owner: string, ttlMs: number, channel: string): Result<0 | 1 | null, Context>;
    /** reentrant-renew.lua: 1 if renewed, 0 if the lock is no longer ours. */
    reentrantRenew(lockKey: string, owner: string, ttlMs: number): Result<0 | 1, Context>;
    /** fenced-acquire.lua: the new fencing token if the lock is now ours, null if it is held. */
    fencedAcquire(lockKey: string, fenceKey: string, token: string, ttlMs: number): Result<number | null, Context>;
    /** fenced-write.lua: (fence, stock, buyers, orders, meta, token, ...userId/quantity/orderId); see its header. */
    fencedWrite(
      fenceKey: string,
      stockKey: string,
      buyersKey: string,
      ordersKey: string,
      metaKey: string,
      token: number,
      ...orders: (string | number)[]
    ): Result<[string, ...number[]], Context>;
  }
}

/** `dir`: where the .lua files are; beside this module unless a caller built elsewhere (the bench) says. */
export function defineScripts(client: Redis, dir = join(__dirname, 'scripts')): void {
  for (const [name, { file, numberOfKeys }] of Object.entries(SCRIPTS)) {
    const lua = readFileSync(join(dir, file), 'utf8');
    client.defineCommand(name, { numberOfKeys, lua });
  }
}
