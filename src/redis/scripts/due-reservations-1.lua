#!lua flags=no-writes
--[[
  The reservations of a shard whose payment deadline has passed by this node's clock
  (includes/shard-marks.lua's `due` index): the sweeper's one command per shard a round.

  KEYS[1]  a shard's due index (sorted set: order id -> deadline, ms)
  ARGV[1]  how many due ones to skip (read past)   ARGV[2]  at most this many
  Returns  the order ids due, earliest first
]]
--- @include "includes/clock"

return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', nowMs(), 'LIMIT', tonumber(ARGV[1]), tonumber(ARGV[2]))
