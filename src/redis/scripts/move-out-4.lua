--[[
  The first step of an escrow move (src/orders/escrow.ts): rights to units leave their
  bucket. In one step on the source's shard, the units come off its stock and the move
  is logged on the source (an `o:<transfer id>` record), so from here on they are in
  flight: in no bucket's stock, never in two, and found by any instance that reads the
  log, which lands them (move-in-4.lua) and closes the record (move-done-3.lua). The
  caller runs this under the source bucket's exclusion (PurchasePath.exclusive), so no
  purchase of the source is between its read of the stock and its write.

  KEYS[1]  source stock   KEYS[2]  source meta (its `epoch`: the product's sale)
  KEYS[3]  source moves hash: `o:<transfer id>` -> `<destination>|<units>|<epoch>|<at ms>`;
           `v`, the moves made through the bucket (a refill's two reads compare it)
  KEYS[4]  source fencing counter
  ARGV[1]  transfer id (unique: a UUID)
  ARGV[2]  the destination bucket's id
  ARGV[3]  units the destination needs: it gets that many, or half the source's stock
           when that is more (so a dry bucket asks rarely), or whatever is left
  Returns  {'OUT', units, epoch}: units in flight under the transfer id
           {'DRY', 0}: the source has nothing to give; nothing changed
           {'NO_EPOCH', 0}: the source has no bucketed sale (or one being restarted); nothing changed
           {'STALE_LOCK', 0}: a later hold of the source was issued; nothing changed
]]
--- @include "includes/clock"

if ARGV[4] ~= '' and tonumber(redis.call('GET', KEYS[4]) or '0') > tonumber(ARGV[4]) then
  return {'STALE_LOCK', 0}
end
local epoch = redis.call('HGET', KEYS[2], 'epoch')
if not epoch then
  return {'NO_EPOCH', 0}
end
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
if stock <= 0 then
  return {'DRY', 0}
end
local units = math.min(stock, math.max(tonumber(ARGV[3]), math.ceil(stock / 2)))
redis.call('DECRBY', KEYS[1], units)
redis.call('HSET', KEYS[3], 'o:' .. ARGV[1], ARGV[2] .. '|' .. units .. '|' .. epoch .. '|' .. nowMs())
redis.call('HINCRBY', KEYS[3], 'v', 1)
return {'OUT', units, epoch}
