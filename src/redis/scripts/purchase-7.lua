#!lua flags=allow-cross-slot-keys
--[[
  The whole purchase as one script (strategy `atomic`): Redis runs a script with
  nothing else interleaved, so the check and the write cannot be split by another
  buyer and no lock is needed. The same rules, in the same order, as
  src/orders/sale-rules.ts.

  KEYS[1]  meta hash (perUserLimit, soldBy; startsAt, endsAt, queueRate)   KEYS[2]  stock
  KEYS[3]  buyers hash                KEYS[4]  orders stream
  KEYS[5]  idempotency hash (includes/idempotency-field.lua)
  KEYS[6]  order states hash   KEYS[7]  deadlines zset (the reservation: includes/order-write.lua)
  ARGV[1]  userId   ARGV[2]  quantity (integer >= 1)   ARGV[3]  orderId
  ARGV[4]  Idempotency-Key ('' without one)   ARGV[5]  claim id   ARGV[6]  outcome TTL in ms
  ARGV[7]  this instance's strategy family (a sale started by another is not ours to sell)
  ARGV[8]  optional: the app's clock in ms, used for the window instead of Redis's
           (SALE_CLOCK=app, the naive check, kept to show it selling early); '' or
           absent: Redis's clock
  ARGV[9]  optional: the expiry (ms) of the Admission-Pass this purchase is made with
           ('' or absent: none); past it by Redis's clock, nothing is written
  ARGV[10] the shard marks' guess: an index into MARK_TAGS, or '' (includes/shard-marks.lua)
  ARGV[11] optional: the bucket list that chose this bucket (OrderLine.bucketList: the
           list part of meta's `epoch`, before its first '.'; '' for one bucket); absent,
           or an epoch of the version before lists (no '.'), not checked
  Returns  {'OK', remaining}
           {'STRATEGY_MISMATCH', soldBy}: the sale's family is another; nothing written
           {'CLAIM_LOST'}: the key's claim is no longer this request's (given up
           after a lost answer, or taken over by a retry); nothing written
           (includes/idempotency-field.lua)
           {'UNKNOWN_PRODUCT'}
           {'BUCKETS_CHANGED'}: the bucket is of another list than ARGV[11] (a DELETE and a
           PUT since the list was read; a restart keeps the list); nothing written
           {'SALE_NOT_STARTED', startsAt, now} / {'SALE_ENDED', endsAt}: by Redis's clock
           {'ADMISSION_REQUIRED'}: the sale has a waiting room and this purchase no pass
           (a pass's purchase is claimed under the key `pass <pass>`: checkout.ts)
           {'PASS_EXPIRED'}: its pass lapsed before this write
           {'LIMIT_REACHED', perUserLimit, bought}
           {'SOLD_OUT'}
           {'INSUFFICIENT_STOCK', remaining}
]]
--- @include "includes/sale-window"
--- @include "includes/sale-family"
--- @include "includes/order-write"

local held = false
if ARGV[4] ~= '' then
  held = redis.call('HGET', KEYS[5], ARGV[4])
  if not isClaimOf(held, ARGV[5]) then
    return {'CLAIM_LOST'}
  end
end
local meta = redis.call('HMGET', KEYS[1], 'perUserLimit', 'soldBy', 'startsAt', 'endsAt', 'queueRate', 'paymentTimeoutMs',
  'epoch')
local limit = meta[1]
local stock = redis.call('GET', KEYS[2])
if not limit or not stock then
  return {'UNKNOWN_PRODUCT'}
end
local refused = familyRefusal(meta[2], ARGV[7])
if refused then
  return refused
end
local epoch = meta[7] or ''
local list = epoch == '' and '' or string.match(epoch, '^([^.]*)%.')
if ARGV[11] and list and ARGV[11] ~= list then
  return {'BUCKETS_CHANGED'}
end
-- The window, by this Redis's clock, in the same step as the write: an app whose clock
-- runs ahead cannot sell early.
local now = nowMs()
local closed = windowRefusal(meta[3], meta[4], tonumber(ARGV[8] or '') or now)
if closed then
  return closed
end
if meta[5] and string.sub(ARGV[4], 1, 5) ~= 'pass ' then
  return {'ADMISSION_REQUIRED'}
end
if ARGV[9] and ARGV[9] ~= '' and now >= tonumber(ARGV[9]) then
  return {'PASS_EXPIRED'}
end
local quantity = tonumber(ARGV[2])
local bought = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
if bought + quantity > tonumber(limit) then
  return {'LIMIT_REACHED', tonumber(limit), bought}
end
stock = tonumber(stock)
if stock <= 0 then
  return {'SOLD_OUT'}
end
if stock < quantity then
  return {'INSUFFICIENT_STOCK', stock}
end
local k = {stock = KEYS[2], buyers = KEYS[3], orders = KEYS[4], idem = KEYS[5], states = KEYS[6], deadlines = KEYS[7],
  marks = shardMarks(ARGV[10], KEYS[4])}
local order = {userId = ARGV[1], quantity = ARGV[2], orderId = ARGV[3], key = ARGV[4], held = held}
return {'OK', writeOrder(k, order, paymentDeadline(meta[6], now), ARGV[6])}
