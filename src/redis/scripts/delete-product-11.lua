--[[
  Retires a product (DELETE /api/products/:id): checks that nothing of its sale lives
  only in Redis, and deletes its keys, in one step. A purchase's write is a script too
  (or, under a lock, runs inside the hold the caller takes around this one), so it lands
  either before this (and is counted below: refused) or after it, where it finds no
  product (UNKNOWN_PRODUCT) and writes nothing.

  What is allowed to go: PostgreSQL holds every order (the order log's `settle` group
  has every entry delivered and acknowledged) and none is still reserved (no payment
  deadline left in the deadlines zset: the sweeper, a payment or a cancel has not
  finished it yet, and PostgreSQL would keep it `reserved` forever). Where the prefix
  does not settle at all, the orders exist only here, and go only when ARGV[1] says so.

  Two keys of the product are not deleted here: the lock, which the caller holds around
  this under a locked strategy and releases after (deleting it would read as a lost
  hold); and the fencing counter, which must never restart: a holder paused before this
  with an older token would otherwise pass the check of a sale started after it
  (fenced-acquire-6.lua).

  KEYS[1]  meta hash (its presence makes the product known; soldBy)
  KEYS[2]  stock   KEYS[3]  buyers hash   KEYS[4]  orders stream
  KEYS[5]  idempotency hash   KEYS[6]  replicated string   KEYS[7]  live hash
  KEYS[8]  order states hash   KEYS[9]  deadlines zset
  KEYS[10] waiting-room hash   KEYS[11] outstanding passes zset
  ARGV[1]  '1' to delete orders that were never settled (the prefix does not settle:
           Redis is their only record); anything else refuses to
  ARGV[2]  the strategy family of the caller ('' none: anyone's)
  ARGV[3]  '1' to delete a sale another family sells (its buyers are not excluded by
           the caller's hold: the operator says none is left)
  ARGV[4]  '1' when orders are settled into PostgreSQL (the caller has DATABASE_URL, or
           a settler marked the prefix: KeyLayout.settling), as reset-sale-10.lua's ARGV[11]
  ARGV[5]  '1' to check only: the refusals below, or {'OK', 0, 0} with nothing deleted (a
           DELETE of a product of several escrow buckets checks them all before it deletes any)
  Returns  {'OK', keys deleted, orders deleted that PostgreSQL never had}
           {'UNKNOWN_PRODUCT'}: no meta hash; nothing changed
           {'STRATEGY_MISMATCH', soldBy}: nothing changed
           {'UNSETTLED', entries}: that many order events are not settled yet (pending,
           or not delivered: a floor of 1 where Redis cannot count the undelivered ones,
           after a deletion); nothing changed
           {'ONLY_IN_REDIS', orders}: the prefix does not settle and the sale has that
           many orders, Redis's alone; nothing changed (ARGV[1] '1' deletes them)
           {'RESERVATIONS_OPEN', orders}: that many orders still wait for their payment
           deadline; nothing changed
]]
--- @include "includes/sale-takeover"
--- @include "includes/settle-group"

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {'UNKNOWN_PRODUCT'}
end
local refused = takeoverRefusal(KEYS[1], ARGV[2], ARGV[3])
if refused then
  return refused
end
-- Orders: the stream's, or the states hash's when SETTLE_TRIM trimmed the settled ones.
local orders = math.max(redis.call('XLEN', KEYS[4]), redis.call('HLEN', KEYS[8]))
local settled = ARGV[4] == '1'
local unsettled = redis.call('XLEN', KEYS[4])
local group = settleGroup(KEYS[4])
if group then
  settled = true
  -- Settled: nothing pending, and no entry after the last one delivered. Asked of the
  -- stream itself, not of `lag`, which Redis cannot always count (nil after a deletion);
  -- a trimmed or an empty stream answers the same.
  local after = redis.call('XRANGE', KEYS[4], '(' .. group['last-delivered-id'], '+', 'COUNT', 1)
  local undelivered = 0
  if #after > 0 then
    undelivered = math.max(tonumber(group['lag']) or 1, 1)
  end
  unsettled = tonumber(group['pending']) + undelivered
end
-- A stream without the group in a prefix that settles: a settler makes the group from id
-- 0 when it meets it, and every entry is still to settle (`unsettled` is its length).
if settled and unsettled > 0 then
  return {'UNSETTLED', unsettled}
end
if not settled and orders > 0 and ARGV[1] ~= '1' then
  return {'ONLY_IN_REDIS', orders}
end
if settled then
  local reserved = redis.call('ZCARD', KEYS[9])
  if reserved > 0 then
    return {'RESERVATIONS_OPEN', reserved}
  end
end
if ARGV[5] == '1' then
  return {'OK', 0, 0}
end
local deleted = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9],
  KEYS[10], KEYS[11])
local discarded = 0
if not settled then
  discarded = orders
end
return {'OK', deleted, discarded}
