--[[
  The last step of an escrow move, on the source: its log record closes. When the
  destination refused the units (move-in-4.lua said STALE), they come back to the
  source's stock, once (the record's deletion decides who gives back), and only if the
  source still sells the sale they left (its epoch is the record's): a restarted sale
  has its own stock.

  KEYS[1]  source stock   KEYS[2]  source meta   KEYS[3]  source moves hash
  ARGV[1]  transfer id    ARGV[2]  'IN' (landed) or 'STALE' (refused: give back)
  Returns  units given back (0 when landed, or already closed by another call)
]]

local record = redis.call('HGET', KEYS[3], 'o:' .. ARGV[1])
if not record then
  return 0
end
redis.call('HDEL', KEYS[3], 'o:' .. ARGV[1])
if ARGV[2] ~= 'STALE' then
  return 0
end
local _, _, units, epoch = string.find(record, '^[^|]*|(%d+)|([^|]*)|')
if epoch ~= redis.call('HGET', KEYS[2], 'epoch') then
  return 0
end
redis.call('INCRBY', KEYS[1], units)
redis.call('HINCRBY', KEYS[3], 'v', 1)
return tonumber(units)
