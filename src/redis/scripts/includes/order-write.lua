--[[
  One order written, in the step that decided it, the same whichever strategy sold it
  (purchase-7.lua, fenced-write-8.lua, keyed-write-7.lua): its units taken from stock,
  the buyer's count, its entry in the order log (which the settler reads), its
  reservation (its state R and its payment deadline) and, for an order sent with an
  Idempotency-Key, its outcome in place of its claim.
]]
--- @include "includes/order-state"
--- @include "includes/idempotency-field"
--- @include "includes/shard-marks"

-- The payment deadline (ms, Redis's clock) of an order written at `now`, or false when
-- the sale has no payment timeout (meta's paymentTimeoutMs, nil when absent).
local function paymentDeadline(timeoutMs, now)
  local timeout = tonumber(timeoutMs or '')
  if timeout then
    return now + timeout
  end
  return false
end

-- k: the product's keys {stock, buyers, orders, idem, states, deadlines} and its shard's
-- marks (includes/shard-marks.lua: taken before the script's first write). o: the order
-- {userId, quantity, orderId, key, held}: `held`, the key's claim field (nil without a key).
-- `...`: more fields of the log entry (the fenced write's token). Returns the stock left.
local function writeOrder(k, o, deadline, outcomeTtlMs, ...)
  local left = redis.call('DECRBY', k.stock, o.quantity)
  redis.call('HINCRBY', k.buyers, o.userId, o.quantity)
  redis.call('XADD', k.orders, '*', 'orderId', o.orderId, 'userId', o.userId, 'quantity', o.quantity, ...)
  markWritten(k.marks)
  redis.call('HSET', k.states, o.orderId, stateRecord('R', o.userId, o.quantity))
  if deadline then
    redis.call('ZADD', k.deadlines, deadline, o.orderId)
    redis.call('ZADD', k.marks.due, deadline, o.orderId)
  end
  if o.held then
    recordOutcome(k.idem, o.key, o.held, o.orderId, o.quantity, left, outcomeTtlMs)
  end
  return left
end
