--[[
  The second step of an escrow move: the rights in flight arrive in the destination
  bucket, at most once per transfer id. The destination keeps a marker per transfer it
  has answered (`i:<id>`, kept for the product's life: a sale restart does not clear
  it), so a second instance finishing the same move, or a retry after a lost reply,
  adds nothing again. Units of another sale than the destination's (its epoch moved on:
  the product was restarted meanwhile) are refused, and the marker says so for good, so
  that the source's give-back (move-done-3.lua) and a landing can never both happen.

  KEYS[1]  destination stock   KEYS[2]  destination meta (`epoch`)
  KEYS[3]  destination landed hash: `i:<transfer id>` -> units landed, or `stale`
  KEYS[4]  destination moves hash: its `v` counts the moves made through the bucket
  ARGV[1]  transfer id   ARGV[2]  units   ARGV[3]  the epoch the source logged
  Returns  'IN': the units are in the destination's stock (now or by an earlier call)
           'STALE': refused (now or before), or a destination with no sale (deleted: nothing
           is written to it): the source takes them back, if its sale is still theirs
]]

local marker = redis.call('HGET', KEYS[3], 'i:' .. ARGV[1])
if marker then
  return marker == 'stale' and 'STALE' or 'IN'
end
local epoch = redis.call('HGET', KEYS[2], 'epoch')
if epoch ~= ARGV[3] then
  -- A bucket deleted (no meta) keeps no marker: its keys are gone for good, and a new
  -- sale of the id has another epoch, so the move is refused there too.
  if redis.call('EXISTS', KEYS[2]) == 1 then
    redis.call('HSET', KEYS[3], 'i:' .. ARGV[1], 'stale')
  end
  return 'STALE'
end
redis.call('INCRBY', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[3], 'i:' .. ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[4], 'v', 1)
return 'IN'
