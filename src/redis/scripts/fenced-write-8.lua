--[[
  The write of a fenced hold (strategy `fenced`): a batch of orders, applied only if
  no lock on the product was issued after ours.

  A holder that paused past its TTL (GC, SIGSTOP) may wake up and write after
  another client took the lock, read the same stock and wrote too: an oversell that
  no client-side check can prevent, because the pause can fall between the check
  and the write. Here the check happens inside Redis, atomically with the write:
  if the fencing counter has moved past our token, someone acquired the lock after
  us, whatever they have written so far, and our read may be stale. We refuse and
  change nothing. (Refusing only tokens older than the last *applied* one, the
  textbook rule for a plain overwrite, is not enough for read-check-write: the later
  holder may still be between its read and its write.)

  KEYS[1]  fencing counter   KEYS[2]  stock
  KEYS[3]  buyers hash       KEYS[4]  orders stream
  KEYS[5]  meta hash: perUserLimit; soldBy, the strategy family of the sale; `fence`
           records the last token applied to the product
  KEYS[6]  idempotency hash: Idempotency-Key -> claim or outcome (idempotency-claim-2.lua)
  KEYS[7]  order states hash   KEYS[8]  deadlines zset (the reservation: keyed-write-7.lua)
  ARGV[1]  our fencing token
  ARGV[2]  how long an outcome is kept, in ms (the idempotency hash's TTL)
  ARGV[3]  our strategy family: a sale started by another family is not ours to write
  ARGV[4]  '' to judge the sale window by this Redis's clock; else the app's clock in ms
           (SALE_CLOCK=app, the naive check kept to show it selling early)
  ARGV[5..] per order, six values: userId, quantity (integer >= 1), orderId,
           Idempotency-Key and claim id ('' and '' for an order sent without a key),
           and the expiry (ms) of the Admission-Pass it was made with ('' for none: an
           order whose pass lapsed by Redis's clock before this write is skipped).
           An order with a key is written only while its claim is still the one this
           request made (`P|<claim id>|...`): a claim given up (the write's answer was
           lost) or taken over by a retry means another request decides that key, and
           this order is skipped; otherwise the outcome replaces the claim.
  Returns  {'OK', stock left after order 1, after order 2, ...}: all written (an order
           skipped for its claim: -1; for its lapsed pass: -2), each stream entry carrying `fence` = our token,
           and meta's `fence` set to it
           {'STALE_LOCK', newest token}: a later holder exists; nothing written
           {'SHORT', stock}: fewer units than the batch needs, which the holder's
           own check rules out; nothing written
           {'OVER_LIMIT', userId, units they have}: an order would take a buyer past
           the per-user limit, which the holder's own check also rules out: another
           holder wrote in between (a holder the fence missed: a lost counter, a
           failover that lost the last acquisition); nothing written
           {'STRATEGY_MISMATCH', soldBy}: the sale was started by another family;
           nothing written
           {'SALE_NOT_STARTED', startsAt, now} / {'SALE_ENDED', endsAt}: the window, judged
           here by Redis's clock in the step that writes: a holder that read inside the
           window and wrote after its end (paused, slow, its lock lost) sells nothing;
           nothing written
  Stock and limits are checked here too, not only by the holder: whenever the fence
  misses a second holder, this is what still stops an oversell and a limit exceeded.
]]
--- @include "includes/sale-window"

local token = tonumber(ARGV[1])
local newest = tonumber(redis.call('GET', KEYS[1]) or '0')
if newest > token then
  return {'STALE_LOCK', newest}
end
local meta = redis.call('HMGET', KEYS[5], 'perUserLimit', 'soldBy', 'startsAt', 'endsAt')
if meta[2] and meta[2] ~= ARGV[3] then
  return {'STRATEGY_MISMATCH', meta[2]}
end
local now = nowMs()
local closed = windowRefusal(meta[3], meta[4], tonumber(ARGV[4]) or now)
if closed then
  return closed
end
local function claimed(i)
  if ARGV[i + 3] == '' then
    return true
  end
  local held = redis.call('HGET', KEYS[6], ARGV[i + 3])
  local mine = 'P|' .. ARGV[i + 4] .. '|'
  return held ~= false and string.sub(held, 1, #mine) == mine
end
local function passValid(i)
  return ARGV[i + 5] == '' or now < tonumber(ARGV[i + 5])
end
local limit = tonumber(meta[1] or '0')
local total = 0
local owned = {}
for i = 5, #ARGV, 6 do
  if passValid(i) and claimed(i) then
    local quantity = tonumber(ARGV[i + 1])
    total = total + quantity
    local user = ARGV[i]
    owned[user] = (owned[user] or tonumber(redis.call('HGET', KEYS[3], user) or '0')) + quantity
    if owned[user] > limit then
      return {'OVER_LIMIT', user, owned[user] - quantity}
    end
  end
end
local stock = tonumber(redis.call('GET', KEYS[2]) or '0')
if stock < total then
  return {'SHORT', stock}
end
redis.call('HSET', KEYS[5], 'fence', ARGV[1])
-- Reservation: the order holds its units until it is paid, cancelled or its payment
-- deadline passes (order-outcome-6.lua); the deadline is Redis's clock, not an app's.
local timeout = tonumber(redis.call('HGET', KEYS[5], 'paymentTimeoutMs') or '')
local deadline = false
if timeout then
  deadline = now + timeout
end
local function reserve(orderId, userId, quantity)
  redis.call('HSET', KEYS[7], orderId, 'R|' .. userId .. '|' .. quantity)
  if deadline then
    redis.call('ZADD', KEYS[8], deadline, orderId)
  end
end
local replies = {'OK'}
for i = 5, #ARGV, 6 do
  if not passValid(i) then
    replies[#replies + 1] = -2
  elseif claimed(i) then
    local left = redis.call('DECRBY', KEYS[2], ARGV[i + 1])
    replies[#replies + 1] = left
    redis.call('HINCRBY', KEYS[3], ARGV[i], ARGV[i + 1])
    redis.call('XADD', KEYS[4], '*', 'orderId', ARGV[i + 2], 'userId', ARGV[i], 'quantity', ARGV[i + 1], 'fence', ARGV[1])
    reserve(ARGV[i + 2], ARGV[i], ARGV[i + 1])
    if ARGV[i + 3] ~= '' then
      local claim = redis.call('HGET', KEYS[6], ARGV[i + 3])
      local fingerprint = string.match(claim, '^P|[^|]*|[^|]*|(.*)$')
      redis.call('HSET', KEYS[6], ARGV[i + 3],
        'D|' .. fingerprint .. '|' .. ARGV[i + 2] .. '|' .. ARGV[i + 1] .. '|' .. left)
      redis.call('PEXPIRE', KEYS[6], ARGV[2])
    end
  else
    replies[#replies + 1] = -1
  end
end
return replies
