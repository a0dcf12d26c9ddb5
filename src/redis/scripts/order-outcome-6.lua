#!lua flags=allow-cross-slot-keys
--[[
  What becomes of a reservation: paid, cancelled, or expired at its payment deadline,
  exactly once. One script, so the state change, the return of the units to stock and
  the event the settler reads are one atomic step: a return racing a purchase can
  neither oversell (the units come back in one INCRBY after the order's own DECRBY)
  nor be lost, and a payment racing the deadline (or a cancel) has exactly one winner.
  The deadline is Redis's clock: whoever comes to a reservation whose deadline has
  passed (the sweeper, a late payment, a cancel) expires it here first, so a payment
  can never win after the deadline, whatever an app's clock says.

  KEYS[1]  order states hash: orderId -> its state (includes/order-state.lua)
  KEYS[2]  deadlines zset: orderId -> payment deadline (ms, Redis's clock), reserved ones only
  KEYS[3]  stock   KEYS[4]  buyers hash   KEYS[5]  orders stream (the event is appended)
  KEYS[6]  meta hash: ordersCancelled, ordersExpired, unitsReturned, the sale's returns
           counted here (reset-sale-10.lua starts them at 0), for the dashboard
  ARGV[1]  orderId
  ARGV[2]  'pay', 'cancel', 'expire' (only if its deadline has passed) or 'read'
  ARGV[3]  paymentId for 'pay' (else '')
  ARGV[4]  the shard marks' guess: an index into MARK_TAGS, or '' (includes/shard-marks.lua):
           the event marks the product for the settler, and the deadline leaves the
           shard's index with the reservation (one left behind after a slot move is the
           sweeper's to drop: src/orders/expiry-sweeper.ts)
  Returns  {'UNKNOWN_ORDER'}
           {status R|P|C|E, userId, quantity, paymentId or '', deadline ms or '',
            1 if this call changed the state, else 0}
           A 'pay' of a paid order returns P with 0 and the paymentId that paid it:
           the same id is a retry, another is a second payment to refund.
]]
--- @include "includes/clock"
--- @include "includes/order-state"
--- @include "includes/shard-marks"

local state = redis.call('HGET', KEYS[1], ARGV[1])
if not state then
  return {'UNKNOWN_ORDER'}
end
local status, user, quantity, payment = parseState(state)
local deadline = redis.call('ZSCORE', KEYS[2], ARGV[1])
local changed = 0
-- Before any write; only a reservation is ever written to (a read too expires it when due).
local marks = status == 'R' and shardMarks(ARGV[4], KEYS[5])

-- The reservation leaves the deadlines, the product's and its shard's, and its event the order log.
local function settle(event, ...)
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZREM', marks.due, ARGV[1])
  redis.call('XADD', KEYS[5], '*', 'event', event, 'orderId', ARGV[1], 'userId', user, 'quantity', quantity, ...)
  markWritten(marks)
end

-- Units go back once: only a reservation (R) returns them, and its state leaves R here.
local function giveBack(to, event)
  redis.call('INCRBY', KEYS[3], quantity)
  if redis.call('HINCRBY', KEYS[4], user, -tonumber(quantity)) <= 0 then
    redis.call('HDEL', KEYS[4], user)
  end
  redis.call('HSET', KEYS[1], ARGV[1], stateRecord(to, user, quantity))
  settle(event)
  -- Counted in the same step as the return, so the counts are exact; a sale started
  -- before they were kept has none, and gets none part-way.
  if redis.call('HGET', KEYS[6], 'unitsReturned') then
    redis.call('HINCRBY', KEYS[6], 'unitsReturned', quantity)
    redis.call('HINCRBY', KEYS[6], to == 'C' and 'ordersCancelled' or 'ordersExpired', 1)
  end
  status = to
  changed = 1
end

if status == 'R' and deadline then
  if nowMs() >= tonumber(deadline) then
    giveBack('E', 'expired')
  end
end
if status == 'R' and ARGV[2] == 'pay' then
  payment = ARGV[3]
  redis.call('HSET', KEYS[1], ARGV[1], stateRecord('P', user, quantity, payment))
  settle('paid', 'paymentId', payment)
  status = 'P'
  changed = 1
elseif status == 'R' and ARGV[2] == 'cancel' then
  giveBack('C', 'cancelled')
end
if status ~= 'R' then
  deadline = false
end
return {status, user, tonumber(quantity), payment, deadline or '', changed}
