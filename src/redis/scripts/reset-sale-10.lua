--[[
  Start or restart a product's sale in one atomic step: no buyer can observe a
  half-reset product (new stock with old buyers, or an order log of the last sale),
  and the dashboard's counts of the last sale go with it, so the new sale's start at 0.
  The caller holds the product's lock, so no purchase is between its read and its
  write while this runs; the lock itself is released by the caller afterwards.
  Each (re)start gets a new sale id in the meta hash: an instance that counted
  answers in the last sale and publishes them after this sends the old id, and
  live-publish-2.lua drops them instead of adding them to the new sale.

  Each also records when it started, on this Redis's clock (startedAt, ms): every order
  of the sale is written at or after it, so a settled order of the product id that this
  sale's Redis does not know and that is older is an earlier sale's (npm run audit).

  KEYS[1]  meta hash (initialStock, perUserLimit, saleId, soldBy, startedAt, startedSaleId)
  KEYS[2]  stock
  KEYS[3]  buyers hash      KEYS[4]  orders stream
  KEYS[5]  idempotency hash (a retry of the last sale's request is a new request)
  KEYS[6]  live hash (the dashboard's answers per instance, live-publish-2.lua)
  KEYS[7]  order states hash   KEYS[8]  deadlines zset (the orders' reservations go with them)
  KEYS[9]  waiting-room hash   KEYS[10]  outstanding passes zset (queue-5.lua): a new
           sale starts a new queue
  ARGV[1]  initial stock (integer >= 0)
  ARGV[2]  per-user limit (integer >= 1)
  ARGV[3]  '1' to discard the orders of the current sale; anything else refuses to
           while its order log has any (the log is the only record of them)
  ARGV[4]  the strategy family that sells this sale (soldBy: instances of another
           refuse the product, since their purchases and ours exclude nothing); ''
           records none, a sale any family may sell (tools that write the sale's
           keys themselves, tests of one purchase path)
  ARGV[5]  '1' to take the product over from another family; anything else refuses
           to: this reset ran under our family's exclusion, not the other's, so one
           of its buyers may be between its read and its write (the operator says
           none is: its instances are gone)
  ARGV[6]  how long a reservation waits for its payment, in ms (meta paymentTimeoutMs)
  ARGV[7]  startsAt, ms since the epoch ('' none: the sale is open at once)
  ARGV[8]  endsAt, ms ('' none: it never closes)
  ARGV[9]  waiting room: buyers admitted per second ('' none)
  ARGV[10] waiting room: how long a pass stays valid, in ms
  ARGV[11] '1' when orders are settled into PostgreSQL (this instance has DATABASE_URL,
           or a settler marked the prefix: KeyLayout.settling): the new order log is
           created with its `settle` consumer group, so the group exists from the sale's
           first order and every later reset, from any instance, sees what is not
           settled; and a log without the group is taken as wholly unsettled (orders of
           a sale started before settlement was on). A log that had the group gets it
           again whatever ARGV[11] says: settlement, once on, stays on
  ARGV[12] escrow buckets (src/sale/buckets.ts): the product sale's epoch, the same in
           every bucket of one PUT, which the moves between them check
           (move-out-4.lua, move-in-4.lua); '' for a product of one bucket
  ARGV[13] bucket 0's list of the other buckets' ids, space-separated ('' for any other
           bucket, and for one bucket)
  ARGV[14] '1' to check only: the refusals below, or {'OK', 0} with nothing changed (a
           PUT of N buckets checks them all before it resets any)
  Returns  {'OK', the new sale's id (integer >= 1, one more than the last sale's)}
           {'HAS_ORDERS', orders in the log}: nothing changed
           {'NOT_SETTLED', entries}: orders are settled into PostgreSQL (the order log
           has the `settle` consumer group, or ARGV[11] says so) and that many entries
           are not settled yet: a restart would lose them; nothing changed
           {'HAS_RESERVATIONS', orders}: with settlement, that many orders still wait for
           their payment: a restart would leave them neither paid nor expired; nothing changed
           {'STRATEGY_MISMATCH', soldBy}: another family sells it; nothing changed
           {'NO_PERMISSION', 'XGROUP|CREATE'}: the new log must have its group and this
           Redis user may not make it (a user without the DATABASE_URL ACL line, in a
           deployment that settles); nothing changed
]]
--- @include "includes/sale-takeover"
--- @include "includes/settle-group"
--- @include "includes/clock"

-- ARGV[4] '' records no family (anyone's), and ARGV[5] takes the sale over: no refusal.
local refused = takeoverRefusal(KEYS[1], ARGV[4], ARGV[5])
if refused then
  return refused
end
-- Orders: the stream's, or the states hash's when the stream was trimmed of settled ones.
local orders = math.max(redis.call('XLEN', KEYS[4]), redis.call('HLEN', KEYS[7]))
if orders > 0 and ARGV[3] ~= '1' then
  return {'HAS_ORDERS', orders}
end
-- Orders settled into PostgreSQL: discarded only once PostgreSQL has every entry and
-- every order is final there (paid, cancelled, expired), so nothing it was told of is
-- left reserved forever, and nothing it was not told of is lost. Whether they are
-- settled is the group's to say (any instance's reset sees it), or this instance's.
local settled = ARGV[11] == '1'
local unsettled = orders
local group = settleGroup(KEYS[4])
if group then
  settled = true
  -- lag is nil when Redis cannot count (entries deleted): then all are taken as unsettled.
  unsettled = tonumber(group['pending']) + (tonumber(group['lag']) or orders)
end
if orders > 0 and settled and unsettled > 0 then
  return {'NOT_SETTLED', unsettled}
end
if orders > 0 and settled then
  local reserved = redis.call('ZCARD', KEYS[8])
  if reserved > 0 then
    return {'HAS_RESERVATIONS', reserved}
  end
end
-- Asked before anything is deleted: a script is not rolled back, and a reset that deleted
-- the buyers and then failed at XGROUP would leave the sale going on without its limits.
if settled and not redis.acl_check_cmd('XGROUP', 'CREATE', KEYS[4], 'settle', '0', 'MKSTREAM') then
  return {'NO_PERMISSION', 'XGROUP|CREATE'}
end
if ARGV[14] == '1' then
  return {'OK', 0}
end
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10])
if settled then
  -- From id 0: every entry of the new log is the group's, whenever the settler first reads.
  redis.call('XGROUP', 'CREATE', KEYS[4], 'settle', '0', 'MKSTREAM')
end
redis.call('HSET', KEYS[1], 'initialStock', ARGV[1], 'perUserLimit', ARGV[2], 'paymentTimeoutMs', ARGV[6],
  'startedAt', nowMs())
-- The window and the waiting room: a field is there only when the sale has it.
local optional = {startsAt = ARGV[7], endsAt = ARGV[8], queueRate = ARGV[9], passTtlMs = ARGV[10], epoch = ARGV[12],
  buckets = ARGV[13]}
for field, value in pairs(optional) do
  if value == '' then
    redis.call('HDEL', KEYS[1], field)
  else
    redis.call('HSET', KEYS[1], field, value)
  end
end
-- queue-5.lua's counters: joined, admitted, admission tokens and when they were counted.
redis.call('HDEL', KEYS[1], 'queueJoined', 'queueAdmitted', 'queueTokens', 'queueAt', 'queueUsed')
-- order-outcome-6.lua's counts of the returns: from 0, and present, for each sale.
redis.call('HSET', KEYS[1], 'ordersCancelled', 0, 'ordersExpired', 0, 'unitsReturned', 0)
if ARGV[4] == '' then
  redis.call('HDEL', KEYS[1], 'soldBy')
else
  redis.call('HSET', KEYS[1], 'soldBy', ARGV[4])
end
redis.call('SET', KEYS[2], ARGV[1])
local saleId = redis.call('HINCRBY', KEYS[1], 'saleId', 1)
-- Whose start startedAt is: a restart by a version that writes none leaves the last
-- sale's behind, with this field naming that sale, so no reader trusts it for this one.
redis.call('HSET', KEYS[1], 'startedSaleId', saleId)
return {'OK', saleId}
