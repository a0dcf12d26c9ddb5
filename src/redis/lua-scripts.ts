import type { ProductKeys } from './key-layout';
import { LuaScript } from './lua-loader';

/** The loader (src/redis/lua-loader.ts), from here too: every script's handle and its loader in one import. */
export { LuaScript, scriptFiles, withIncludes, type ScriptClient } from './lua-loader';

// ---------------------------------------------------------------- the scripts

/**
 * The Lua scripts, typed: KEYS, then ARGV, then the reply, as each file's header
 * documents them (src/redis/scripts/<name>-<numberOfKeys>.lua). A script of a product's
 * keys has its KEYS built by one function beside its handle, `<handle>Keys(k)`, as
 * bullmq's Scripts class builds each list once: no caller writes a key list of its own
 * (lua-scripts.spec.ts checks both).
 */

/** Compare-and-delete of a lock, announced on `channel`. 1 if ours and deleted, 0 if not ours. */
export const releaseLock = new LuaScript<[lock: string], [token: string, channel: string], 0 | 1>('release-lock');

/** A sale's start or restart in one step: the new sale's id, or the orders that a restart would discard. */
export const resetSale = new LuaScript<
  [
    meta: string,
    stock: string,
    buyers: string,
    orders: string,
    idem: string,
    live: string,
    states: string,
    deadlines: string,
    queue: string,
    admitted: string,
  ],
  [
    initialStock: number,
    perUserLimit: number,
    discardOrders: '1' | '0',
    family: string,
    switchFamily: '1' | '0',
    paymentTimeoutMs: number,
    startsAt: number | '',
    endsAt: number | '',
    admitPerSecond: number | '',
    passTtlMs: number | '',
    settle: '1' | '0',
    epoch: string,
    buckets: string,
    checkOnly: '1' | '0',
  ],
  | ['OK', number]
  | ['HAS_ORDERS', number]
  | ['STRATEGY_MISMATCH', string]
  | ['NOT_SETTLED', number]
  | ['NO_PERMISSION', string]
  | ['HAS_RESERVATIONS', number]
>('reset-sale');

/** reset-sale-10.lua's KEYS for a product. */
export function resetSaleKeys(k: ProductKeys): Parameters<typeof resetSale.run>[1] {
  return [k.meta, k.stock, k.buyers, k.orders, k.idem, k.live, k.states, k.deadlines, k.queue, k.admitted];
}

/** Retires a product (DELETE /api/products/:id): its keys deleted, or why not, nothing changed. */
export const deleteProduct = new LuaScript<
  [
    meta: string,
    stock: string,
    buyers: string,
    orders: string,
    idem: string,
    replicated: string,
    live: string,
    states: string,
    deadlines: string,
    queue: string,
    admitted: string,
  ],
  [discardOrders: '1' | '0', family: string, switchFamily: '1' | '0', settle: '1' | '0', checkOnly: '1' | '0'],
  | ['OK', keys: number, discarded: number]
  | ['UNKNOWN_PRODUCT']
  | ['STRATEGY_MISMATCH', string]
  | ['UNSETTLED', number]
  | ['ONLY_IN_REDIS', number]
  | ['RESERVATIONS_OPEN', number]
>('delete-product');

/**
 * delete-product-11.lua's KEYS for a product: every key of ProductKeys but the lock (its
 * holder releases it) and the fencing counter (never restarted).
 */
export function deleteProductKeys(k: ProductKeys): Parameters<typeof deleteProduct.run>[1] {
  return [
    k.meta,
    k.stock,
    k.buyers,
    k.orders,
    k.idem,
    k.replicated,
    k.live,
    k.states,
    k.deadlines,
    k.queue,
    k.admitted,
  ];
}

/** An escrow move's first step, on the source bucket (src/orders/escrow.ts): units off its stock, in flight, logged there. */
export const moveOut = new LuaScript<
  [stock: string, meta: string, moves: string, fence: string],
  [transferId: string, destination: string, units: number, fence: number | ''],
  ['OUT', number, string] | ['DRY', 0] | ['NO_EPOCH', 0] | ['STALE_LOCK', 0]
>('move-out');

/** An escrow move's landing in the destination bucket, once per transfer id. */
export const moveIn = new LuaScript<
  [stock: string, meta: string, landed: string, moves: string],
  [transferId: string, units: number, epoch: string],
  'IN' | 'STALE'
>('move-in');

/** An escrow move's record closed on the source; its units back there when the destination refused them. */
export const moveDone = new LuaScript<
  [stock: string, meta: string, moves: string],
  [transferId: string, landing: 'IN' | 'STALE'],
  number
>('move-done');

/** move-out-4.lua's KEYS for the source bucket. */
export function moveOutKeys(k: ProductKeys): Parameters<typeof moveOut.run>[1] {
  return [k.stock, k.meta, k.moves, k.fence];
}

/** move-done-3.lua's KEYS for the source bucket. */
export function moveDoneKeys(k: ProductKeys): Parameters<typeof moveDone.run>[1] {
  return [k.stock, k.meta, k.moves];
}

/** move-in-4.lua's KEYS for the destination bucket. */
export function moveInKeys(k: ProductKeys): Parameters<typeof moveIn.run>[1] {
  return [k.stock, k.meta, k.landed, k.moves];
}

/** Ends a product's sale now (endsAt, by Redis's clock): its end, or UNKNOWN_PRODUCT. */
export const closeSale = new LuaScript<[meta: string], [unused: ''], ['OK', number] | ['UNKNOWN_PRODUCT']>(
  'close-sale',
);

/** A product's sale in one read-only step (answered under OOM too): its meta fields, stock, order count and Redis's clock. */
export const productRead = new LuaScript<
  [meta: string, stock: string, states: string],
  [unused: ''],
  [...meta: (string | null)[]]
>('product-read');

/** product-read-3.lua's KEYS for a product. */
export function productReadKeys(k: ProductKeys): Parameters<typeof productRead.run>[1] {
  return [k.meta, k.stock, k.states];
}

/** The whole purchase (strategy `atomic`). */
export const purchase = new LuaScript<
  [meta: string, stock: string, buyers: string, orders: string, idem: string, states: string, deadlines: string],
  [
    userId: string,
    quantity: number,
    orderId: string,
    idempotencyKey: string,
    claimId: string,
    outcomeTtlMs: number,
    family: string,
    appClock: number | '',
    passExpiresAt: number | '',
    marksGuess: string,
    ...bucketList: string[],
  ],
  [status: string, ...values: (number | string)[]]
>('purchase');

/** purchase-7.lua's KEYS for a product. */
export function purchaseKeys(k: ProductKeys): Parameters<typeof purchase.run>[1] {
  return [k.meta, k.stock, k.buyers, k.orders, k.idem, k.states, k.deadlines];
}

/** null when acquired or re-entered, else the PTTL of the other owner's lock. */
export const reentrantAcquire = new LuaScript<[lock: string], [owner: string, ttlMs: number], number | null>(
  'reentrant-acquire',
);

/** 1 if re-entered (the owner still held it), 0 if the lock is no longer the owner's. */
export const reentrantReenter = new LuaScript<[lock: string], [owner: string, ttlMs: number], 0 | 1>(
  'reentrant-reenter',
);

/** null if not ours, 0 if still held, 1 if now free (and published on `channel`); `all` leaves every hold of the owner. */
export const reentrantRelease = new LuaScript<
  [lock: string],
  [owner: string, ttlMs: number, channel: string, holds: 'one' | 'all'],
  0 | 1 | null
>('reentrant-release');

/** 1 if renewed, 0 if the lock is no longer ours. */
export const reentrantRenew = new LuaScript<[lock: string], [owner: string, ttlMs: number], 0 | 1>('reentrant-renew');

/**
 * {token} (the new fencing token) if the lock is now ours, with the sale's read when
 * ARGV[3] names one (a batch's read under the lock, taken in the same step); null if it is held.
 */
export const fencedAcquire = new LuaScript<
  [lock: string, fence: string, meta: string, stock: string, buyers: string, idem: string],
  [token: string, ttlMs: number, ...read: (string | number)[]],
  [token: number, ...read: unknown[]] | null
>('fenced-acquire');

/** fenced-acquire-6.lua's KEYS for a product. */
export function fencedAcquireKeys(k: ProductKeys): Parameters<typeof fencedAcquire.run>[1] {
  return [k.lock, k.fence, k.meta, k.stock, k.buyers, k.idem];
}

/** A batch of orders under a fenced hold: per order userId, quantity, orderId, Idempotency-Key, claim id. */
export const fencedWrite = new LuaScript<
  [
    fence: string,
    stock: string,
    buyers: string,
    orders: string,
    meta: string,
    idem: string,
    states: string,
    deadlines: string,
  ],
  [
    token: number,
    outcomeTtlMs: number,
    family: string,
    appClock: number | '',
    marksGuess: string,
    ...orders: (string | number)[],
  ],
  [status: string, ...values: (number | string)[]]
>('fenced-write');

/** fenced-write-8.lua's KEYS for a product. */
export function fencedWriteKeys(k: ProductKeys): Parameters<typeof fencedWrite.run>[1] {
  return [k.fence, k.stock, k.buyers, k.orders, k.meta, k.idem, k.states, k.deadlines];
}

/** A batch of orders under an unfenced hold, keyed ones only while their claim is theirs, inside the window: the stock left after each, or why one was skipped. */
export const keyedWrite = new LuaScript<
  [stock: string, buyers: string, orders: string, idem: string, meta: string, states: string, deadlines: string],
  [outcomeTtlMs: number, appClock: number | '', marksGuess: string, ...orders: (string | number)[]],
  (number | OrderSkipped)[] | ['SALE_ENDED', number] | ['SALE_NOT_STARTED', number, number]
>('keyed-write');

/** keyed-write-7.lua's KEYS for a product. */
export function keyedWriteKeys(k: ProductKeys): Parameters<typeof keyedWrite.run>[1] {
  return [k.stock, k.buyers, k.orders, k.idem, k.meta, k.states, k.deadlines];
}

/**
 * Why a write script skipped an order, nothing of it written, said the same way by all
 * three (a purchase-7.lua status, a batch's entry in place of the stock left): its key's
 * claim is no longer its request's, or its Admission-Pass lapsed by Redis's clock.
 */
export type OrderSkipped = 'CLAIM_LOST' | 'PASS_EXPIRED';

/** Claims an Idempotency-Key (checking an Admission-Pass with it), or says what became of it. */
export const idempotencyClaim = new LuaScript<
  [idem: string, queue: string, meta: string],
  [
    key: string,
    claimId: string,
    fingerprint: string,
    claimTtlMs: number,
    outcomeTtlMs: number,
    pass: string,
    userId: string,
    passRecord: string,
    passEpoch: string,
  ],
  | ['CLAIMED', number]
  | ['DONE', string, number, number, number]
  | ['MISMATCH']
  | ['IN_FLIGHT', number]
  | ['PASS_INVALID', 'unknown' | 'owner' | 'expired']
>('idempotency-claim');

/** idempotency-claim-3.lua's KEYS for a product. */
export function idempotencyClaimKeys(k: ProductKeys): Parameters<typeof idempotencyClaim.run>[1] {
  return [k.idem, k.queue, k.meta];
}

/** Notes that `replicas` replicas acknowledged the order a key holds: 1 if noted, 0 if the key holds no such order. */
export const idempotencyAcknowledged = new LuaScript<
  [idem: string],
  [key: string, orderId: string, replicas: number],
  0 | 1
>('idempotency-acknowledged');

/** Gives up this request's claim on an Idempotency-Key: 1 if given up, 0 if no longer ours. */
export const idempotencyRelease = new LuaScript<[idem: string], [key: string, claimId: string], 0 | 1>(
  'idempotency-release',
);

/**
 * Adds an instance's answers since its last publish to a product's live hash, unless
 * they belong to another sale: the current sale id, or null if the product has no sale.
 */
export const livePublish = new LuaScript<
  [meta: string, live: string],
  [
    instance: string,
    pid: number,
    waiting: number,
    lostLocks: number,
    nowMs: number,
    ttlMs: number,
    saleId: string,
    ...answers: (string | number)[],
  ],
  string | null
>('live-publish');

/** live-publish-2.lua's KEYS for a product. */
export function livePublishKeys(k: ProductKeys): Parameters<typeof livePublish.run>[1] {
  return [k.meta, k.live];
}

/** Trims an order stream of what every consumer group has settled (acknowledged): the entries trimmed. */
export const trimSettled = new LuaScript<[orders: string], [unused: ''], number>('trim-settled');

/** Whether an order log is settled as far as its group knows (the entries pending, -1 when gone); once it is, its consumers deleted. */
export const settleDrained = new LuaScript<[orders: string], [group: string], number>('settle-drained');

/** A shard mark removed only if its score is still the one read: 1 if removed. */
export const unmark = new LuaScript<[marks: string], [member: string, score: string], 0 | 1>('unmark');

/** A shard's reservations due by its node's clock (order ids, earliest first). */
export const dueReservations = new LuaScript<[due: string], [offset: number, limit: number], string[]>(
  'due-reservations',
);

/** The commands the scripts run that this Redis user may not (NOPERM), tried on throwaway keys. */
export const permissionCheck = new LuaScript<
  [text: string, hash: string, stream: string, sortedSet: string],
  [channel: string, settle: '1' | '0'],
  string[]
>('permission-check');

/** permission-check-4.lua's KEYS: throwaway keys of each type, in one product's slot. */
export function permissionCheckKeys(k: ProductKeys): Parameters<typeof permissionCheck.run>[1] {
  return [k.stock, k.meta, k.orders, k.deadlines];
}

/** A reservation paid, cancelled, expired (its deadline passed) or read: exactly one outcome, units back once. */
export const orderOutcome = new LuaScript<
  [states: string, deadlines: string, stock: string, buyers: string, orders: string, meta: string],
  [orderId: string, action: 'pay' | 'cancel' | 'expire' | 'read', paymentId: string, marksGuess: string],
  | ['UNKNOWN_ORDER']
  | [
      status: 'R' | 'P' | 'C' | 'E',
      userId: string,
      quantity: number,
      paymentId: string,
      deadline: string,
      changed: 0 | 1,
    ]
>('order-outcome');

/** order-outcome-6.lua's KEYS for a product. */
export function orderOutcomeKeys(k: ProductKeys): Parameters<typeof orderOutcome.run>[1] {
  return [k.states, k.deadlines, k.stock, k.buyers, k.orders, k.meta];
}

/** A product's waiting room, joined or read, with its admissions (queue-5.lua). */
export const queue = new LuaScript<
  [meta: string, stock: string, queue: string, admitted: string, idem: string],
  ['join', userId: string, ticket: string, pass: string, count: string] | ['read', ticket: string, count: string],
  [
    state: string,
    ticket?: string,
    position?: number,
    pass?: string,
    passExpiresAt?: number,
    admitPerSecond?: number,
    userId?: string,
    opensInMs?: number,
  ]
>('queue');

/** queue-5.lua's KEYS for a product. */
export function queueKeys(k: ProductKeys): Parameters<typeof queue.run>[1] {
  return [k.meta, k.stock, k.queue, k.admitted, k.idem];
}

/** Marks a pass of a bucketed product's queue used, once, with the units it bought: 1 if marked now (pass-used-3.lua). */
export const passUsed = new LuaScript<
  [queue: string, admitted: string, meta: string],
  [pass: string, units: number],
  0 | 1
>('pass-used');

/** pass-used-3.lua's KEYS for a product (bucket 0, where its queue is). */
export function passUsedKeys(k: ProductKeys): Parameters<typeof passUsed.run>[1] {
  return [k.queue, k.admitted, k.meta];
}
