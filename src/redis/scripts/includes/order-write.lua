--[[
  One order written, in the step that decided it, the same whichever strategy sold it
  (purchase-7.lua, fenced-write-8.lua, keyed-write-7.lua): its units taken from stock,
  the buyer's count, its entry in the order log (which the settler reads), its
  reservation (its state R and its payment deadline) and, for an order sent with an
  Idempotency-Key, its outcome in place of its claim.
]]
--- @include "includes/order-state"
--- @include "includes/idempotency-field"

-- The payment deadline (ms, Redis's clock) of an order written at `now`, or false when
-- the sale has no payment timeout (meta's paymentTimeoutMs, nil when absent).
local function paymentDeadline(timeoutMs, now)
  local timeout = tonumber(timeoutMs or '')
  if timeout then
    return now + timeout
  end
  return false
end

-- k: the product's keys {stock, buyers, orders, idem, states, deadlines}. o: the order
-- {userId, quantity, orderId, key, held}: `held`, the key's claim field (nil without a key).
-- `...`: more fields of the log entry (the fenced write's token). Returns the stock left.
local function writeOrder(k, o, deadline, outcomeTtlMs, ...)
  local left = redis.call('DECRBY', k.stock, o.quantity)
  redis.call('HINCRBY', k.buyers, o.userId, o.quantity)
  redis.call('XADD', k.orders, '*', 'orderId', o.orderId, 'userId', o.userId, 'quantity', o.quantity, ...)
  redis.call('HSET', k.states, o.orderId, stateRecord('R', o.userId, o.quantity))
  if deadline then
    redis.call('ZADD', k.deadlines, deadline, o.orderId)
  end
  if o.held then
    recordOutcome(k.idem, o.key, o.held, o.orderId, o.quantity, left, outcomeTtlMs)
  end
  return left
end

-- The orders of a batch, from ARGV[first..] (six values each: userId, quantity, orderId,
-- Idempotency-Key and claim id, '' and '' without a key, and the expiry in ms of the
-- Admission-Pass it was made with, '' for none), each with `skipped`, why it is not to be
-- written, or nil: 'PASS_EXPIRED', its pass lapsed by Redis's clock (`now`) before this
-- write; 'CLAIM_LOST', its key's claim is no longer its request's. The claim field read
-- is kept in `held` for writeOrder.
local function batchOrders(first, k, now)
  local orders = {}
  for i = first, #ARGV, 6 do
    local o = {userId = ARGV[i], quantity = ARGV[i + 1], orderId = ARGV[i + 2], key = ARGV[i + 3]}
    if ARGV[i + 5] ~= '' and now >= tonumber(ARGV[i + 5]) then
      o.skipped = 'PASS_EXPIRED'
    elseif o.key ~= '' then
      o.held = redis.call('HGET', k.idem, o.key)
      if not isClaimOf(o.held, ARGV[i + 4]) then
        o.skipped = 'CLAIM_LOST'
      end
    end
    orders[#orders + 1] = o
  end
  return orders
end
