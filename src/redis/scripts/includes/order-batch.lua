--[[
  The orders of a batch written under a hold (fenced-write-8.lua, keyed-write-7.lua), as
  src/orders/sale-store.ts sends them: six values each in ARGV. purchase-7.lua writes one
  order of its own and needs none of this.
]]
--- @include "includes/order-write"

-- The orders of a batch, from ARGV[first..] (six values each: userId, quantity, orderId,
-- Idempotency-Key and claim id, '' and '' without a key, and the expiry in ms of the
-- Admission-Pass it was made with, '' for none), each with `skipped`, why it is not to be
-- written, or nil: 'PASS_EXPIRED', its pass lapsed by Redis's clock (`now`) before this
-- write; 'CLAIM_LOST', its key's claim is no longer its request's, or an earlier order of
-- this batch already answers its key (one key, one order, whatever the caller sent). The
-- claim field read is kept in `held` for writeOrder.
local function batchOrders(first, k, now)
  local orders = {}
  local answered = {}
  for i = first, #ARGV, 6 do
    local o = {userId = ARGV[i], quantity = ARGV[i + 1], orderId = ARGV[i + 2], key = ARGV[i + 3]}
    if ARGV[i + 5] ~= '' and now >= tonumber(ARGV[i + 5]) then
      o.skipped = 'PASS_EXPIRED'
    elseif o.key ~= '' then
      o.held = redis.call('HGET', k.idem, o.key)
      if answered[o.key] or not isClaimOf(o.held, ARGV[i + 4]) then
        o.skipped = 'CLAIM_LOST'
      else
        answered[o.key] = true
      end
    end
    orders[#orders + 1] = o
  end
  return orders
end
