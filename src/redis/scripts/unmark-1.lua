--[[
  Takes a member off a shard's marks (includes/shard-marks.lua) only if its score is
  still the one its reader saw: a settler that found a product's log settled removes
  its mark unless an entry was written since (the write raised the score).

  KEYS[1]  a shard's marks (sorted set)
  ARGV[1]  the member   ARGV[2]  the score read (as Redis replied it)
  Returns  1 if removed, 0 if the score moved (or the member was gone)
]]
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) == tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
