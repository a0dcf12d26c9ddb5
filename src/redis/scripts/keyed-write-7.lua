--[[
  The write of an unfenced hold (`lock`, `reentrant`, `redlock`, the mistakes) when a
  batch has orders sent with an Idempotency-Key: each keyed order is written only while
  its claim is still the one its request made, as fenced-write-8.lua and purchase-7.lua
  check it. A MULTI cannot: a write delayed past the claim's lapse (its holder stalled,
  its bytes held in the network) would land beside the order of the retry that took the
  claim over, two orders for one key. Nothing else is checked here: stock and limits
  are the lock's to protect (that an unfenced late write can still oversell is what
  `lock` teaches); a batch without keys is written with a plain MULTI.

  KEYS[1]  stock   KEYS[2]  buyers hash   KEYS[3]  orders stream
  KEYS[4]  idempotency hash (idempotency-claim-2.lua)
  KEYS[5]  meta hash: paymentTimeoutMs, startsAt, endsAt   KEYS[6]  order states hash   KEYS[7]  deadlines zset
  ARGV[1]  how long an outcome is kept, in ms (the idempotency hash's TTL)
  ARGV[2]  '' to judge the sale window by this Redis's clock; else the app's clock in ms
           (SALE_CLOCK=app, the naive check kept to show it selling early)
  ARGV[3..] per order, six values: userId, quantity (integer >= 1), orderId,
           Idempotency-Key and claim id ('' and '' for an order without a key), and
           the expiry (ms) of the Admission-Pass it was made with ('' for none)
  Returns  the stock left after each order, in order (below 0 when a late write
           oversold: nothing here stops it); 'CLAIM_LOST' for an order skipped because
           its claim is no longer its request's, 'PASS_EXPIRED' for one whose pass
           lapsed by Redis's clock before this write (nothing of either written)
           {'SALE_NOT_STARTED', startsAt, now} / {'SALE_ENDED', endsAt}: the window, judged
           here by Redis's clock in the step that writes, so a holder that read inside it
           and writes after its end (paused, slow) sells nothing; nothing written
]]
--- @include "includes/sale-window"

local meta = redis.call('HMGET', KEYS[5], 'paymentTimeoutMs', 'startsAt', 'endsAt')
local now = nowMs()
local closed = windowRefusal(meta[2], meta[3], tonumber(ARGV[2]) or now)
if closed then
  return closed
end
-- Reservation: the order holds its units until it is paid, cancelled or its payment
-- deadline passes (order-outcome-6.lua); the deadline is Redis's clock, not an app's.
local timeout = tonumber(meta[1] or '')
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
local function claimed(i)
  if ARGV[i + 3] == '' then
    return true
  end
  local held = redis.call('HGET', KEYS[4], ARGV[i + 3])
  local mine = 'P|' .. ARGV[i + 4] .. '|'
  return held ~= false and string.sub(held, 1, #mine) == mine
end
-- A pass buys only while it is valid by this Redis's clock, checked in the write itself:
-- a purchase that waited for the lock past its pass's expiry buys nothing.
local function passValid(i)
  return ARGV[i + 5] == '' or now < tonumber(ARGV[i + 5])
end
local replies = {}
for i = 3, #ARGV, 6 do
  if not passValid(i) then
    replies[#replies + 1] = 'PASS_EXPIRED'
  elseif claimed(i) then
    local left = redis.call('DECRBY', KEYS[1], ARGV[i + 1])
    replies[#replies + 1] = left
    redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1])
    redis.call('XADD', KEYS[3], '*', 'orderId', ARGV[i + 2], 'userId', ARGV[i], 'quantity', ARGV[i + 1])
    reserve(ARGV[i + 2], ARGV[i], ARGV[i + 1])
    if ARGV[i + 3] ~= '' then
      local claim = redis.call('HGET', KEYS[4], ARGV[i + 3])
      local fingerprint = string.match(claim, '^P|[^|]*|[^|]*|(.*)$')
      redis.call('HSET', KEYS[4], ARGV[i + 3],
        'D|' .. fingerprint .. '|' .. ARGV[i + 2] .. '|' .. ARGV[i + 1] .. '|' .. left)
      redis.call('PEXPIRE', KEYS[4], ARGV[1])
    end
  else
    replies[#replies + 1] = 'CLAIM_LOST'
  end
end
return replies
