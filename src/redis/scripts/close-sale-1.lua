--[[
  Ends a product's sale now, by this Redis's clock: its endsAt becomes now (unless it
  ended already), and a startsAt still ahead becomes now too, so the window is over and
  GET says so. Nothing else: every purchase path judges the window in the step that
  writes (includes/sale-window.lua), so no order is written after this, whatever a
  buyer read before it, and no lock is needed. The first step of restarting a sale
  whose reservations must be settled first (products.service.ts closeSale).

  KEYS[1]  meta hash (initialStock, startsAt, endsAt)
  ARGV[1]  unused ('')
  Returns  {'OK', endsAt ms}: the sale's end, now or earlier
           {'UNKNOWN_PRODUCT'}: the product has no sale; nothing changed
]]
--- @include "includes/clock"

local meta = redis.call('HMGET', KEYS[1], 'initialStock', 'startsAt', 'endsAt')
if not meta[1] then
  return {'UNKNOWN_PRODUCT'}
end
local now = nowMs()
if meta[3] and tonumber(meta[3]) <= now then
  return {'OK', tonumber(meta[3])}
end
if meta[2] and tonumber(meta[2]) > now then
  redis.call('HSET', KEYS[1], 'startsAt', now)
end
redis.call('HSET', KEYS[1], 'endsAt', now)
return {'OK', now}
