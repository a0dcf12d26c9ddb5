--[[
  A pass of a product sold from several escrow buckets has bought (src/door/waiting-room.ts
  used()): its purchase was made in the buyer's home bucket, on another shard, so the
  queue (bucket 0) learns it here, once. Nothing is written unless this sale's queue
  issued the pass (its `x:<pass>`): a mark landing after a DELETE or a restart of the
  sale creates no key and marks nothing of the new sale.

  KEYS[1]  waiting-room hash (key-layout.ts)   KEYS[2]  outstanding passes zset
  KEYS[3]  meta hash: queueUsed, the units bought with passes marked used (queue-5.lua)
  ARGV[1]  the pass   ARGV[2]  the units its order bought
  Returns  1 if marked now; 0 if marked before, or not a pass of this sale's queue
]]
if redis.call('HEXISTS', KEYS[1], 'x:' .. ARGV[1]) == 0 then
  return 0
end
-- It no longer holds units back.
redis.call('ZREM', KEYS[2], ARGV[1])
-- Once: a replay of the purchase marks nothing more.
if redis.call('HEXISTS', KEYS[1], 'y:' .. ARGV[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'y:' .. ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[3], 'queueUsed', ARGV[2])
return 1
