--[[
  The whole purchase as one script (strategy `atomic`): Redis runs a script with
  nothing else interleaved, so the check and the write cannot be split by another
  buyer and no lock is needed. The same rules, in the same order, as
  src/orders/sale-rules.ts.

  KEYS[1]  meta hash (perUserLimit, soldBy; startsAt, endsAt, queueRate)   KEYS[2]  stock
  KEYS[3]  buyers hash                KEYS[4]  orders stream
  KEYS[5]  idempotency hash (idempotency-claim-2.lua)
  KEYS[6]  order states hash   KEYS[7]  deadlines zset (the reservation: keyed-write-7.lua)
  ARGV[1]  userId   ARGV[2]  quantity (integer >= 1)   ARGV[3]  orderId
  ARGV[4]  Idempotency-Key ('' without one)   ARGV[5]  claim id   ARGV[6]  outcome TTL in ms
  ARGV[7]  this instance's strategy family (a sale started by another is not ours to sell)
  ARGV[8]  optional: the app's clock in ms, used for the window instead of Redis's
           (SALE_CLOCK=app, the naive check, kept to show it selling early); '' or
           absent: Redis's clock
  ARGV[9]  optional: the expiry (ms) of the Admission-Pass this purchase is made with
           ('' or absent: none); past it by Redis's clock, nothing is written
  Returns  {'OK', remaining}
           {'STRATEGY_MISMATCH', soldBy}: the sale's family is another; nothing written
           {'CLAIM_LOST'}: the key's claim is no longer this request's (given up
           after a lost answer, or taken over by a retry); nothing written
           {'UNKNOWN_PRODUCT'}
           {'SALE_NOT_STARTED', startsAt, now} / {'SALE_ENDED', endsAt}: by Redis's clock
           {'ADMISSION_REQUIRED'}: the sale has a waiting room and this purchase no pass
           (a pass's purchase is claimed under the key `pass <pass>`: checkout.ts)
           {'PASS_EXPIRED'}: its pass lapsed before this write
           {'LIMIT_REACHED', perUserLimit, bought}
           {'SOLD_OUT'}
           {'INSUFFICIENT_STOCK', remaining}
]]
--- @include "includes/sale-window"

local claim = false
if ARGV[4] ~= '' then
  claim = redis.call('HGET', KEYS[5], ARGV[4])
  local mine = 'P|' .. ARGV[5] .. '|'
  if claim == false or string.sub(claim, 1, #mine) ~= mine then
    return {'CLAIM_LOST'}
  end
end
local meta = redis.call('HMGET', KEYS[1], 'perUserLimit', 'soldBy', 'startsAt', 'endsAt', 'queueRate', 'paymentTimeoutMs')
local limit = meta[1]
local stock = redis.call('GET', KEYS[2])
if not limit or not stock then
  return {'UNKNOWN_PRODUCT'}
end
if meta[2] and meta[2] ~= ARGV[7] then
  return {'STRATEGY_MISMATCH', meta[2]}
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
-- Reservation: the order holds its units until it is paid, cancelled or its payment
-- deadline passes (order-outcome-6.lua); the deadline is Redis's clock, not an app's.
local timeout = tonumber(meta[6] or '')
local deadline = false
if timeout then
  deadline = now + timeout
end
local function reserve(orderId, userId, quantity)
  redis.call('HSET', KEYS[6], orderId, 'R|' .. userId .. '|' .. quantity)
  if deadline then
    redis.call('ZADD', KEYS[7], deadline, orderId)
  end
end
local remaining = redis.call('DECRBY', KEYS[2], quantity)
redis.call('HINCRBY', KEYS[3], ARGV[1], quantity)
redis.call('XADD', KEYS[4], '*', 'orderId', ARGV[3], 'userId', ARGV[1], 'quantity', ARGV[2])
reserve(ARGV[3], ARGV[1], ARGV[2])
if claim then
  local fingerprint = string.match(claim, '^P|[^|]*|[^|]*|(.*)$')
  redis.call('HSET', KEYS[5], ARGV[4], 'D|' .. fingerprint .. '|' .. ARGV[3] .. '|' .. ARGV[2] .. '|' .. remaining)
  redis.call('PEXPIRE', KEYS[5], ARGV[6])
end
return {'OK', remaining}
