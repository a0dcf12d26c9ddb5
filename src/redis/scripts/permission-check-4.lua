--[[
  Which commands the app's scripts run that this Redis user may not (ACL): each is
  tried on throwaway keys, its NOPERM caught, and the keys deleted. Run once at
  start-up, so a user without, say, SPUBLISH (Redis 7's acl-pubsub-default
  resetchannels) is named then, instead of every lock release failing after its DEL.
  Keep the list equal to the commands src/redis/scripts/*.lua call (lua-scripts.spec.ts
  checks it).

  KEYS[1]  a string key   KEYS[2]  a hash key   KEYS[3]  a stream key
  KEYS[4]  a sorted set key (all throwaway, under the app's prefix, in one slot)
  ARGV[1]  a shard channel in the keys' slot, as the lock's release channel is
  ARGV[2]  '1' when the app settles orders (DATABASE_URL): reset-sale-10.lua then
           creates the order log's consumer group, which is tried too
  Returns  the commands refused with NOPERM (an empty list: all allowed)
]]
local denied = {}
local function try(command, ...)
  local reply = redis.pcall(command, ...)
  -- NOPERM outside a script; inside one Redis 7 says "The user executing the script can't ...".
  if type(reply) == 'table' and reply.err
    and (string.find(reply.err, 'NOPERM', 1, true) or string.find(reply.err, "executing the script can't", 1, true)) then
    denied[#denied + 1] = command
  end
end
try('SET', KEYS[1], '5', 'PX', '10000')
try('GET', KEYS[1])
try('INCR', KEYS[1])
try('DECRBY', KEYS[1], '1')
try('INCRBY', KEYS[1], '1')
try('PEXPIRE', KEYS[1], '10000')
try('PTTL', KEYS[1])
try('EXISTS', KEYS[1])
try('HSET', KEYS[2], 'f', '1')
try('HGET', KEYS[2], 'f')
try('HMGET', KEYS[2], 'f')
try('HLEN', KEYS[2])
try('HEXISTS', KEYS[2], 'f')
try('HINCRBY', KEYS[2], 'f', '1')
try('HDEL', KEYS[2], 'f')
try('XADD', KEYS[3], '*', 'f', '1')
try('XLEN', KEYS[3])
try('XINFO', 'GROUPS', KEYS[3])
try('XRANGE', KEYS[3], '-', '+', 'COUNT', '1')
try('XPENDING', KEYS[3], 'permission-check')
try('XTRIM', KEYS[3], 'MAXLEN', '1000')
if ARGV[2] == '1' then
  try('XGROUP', 'CREATE', KEYS[3], 'permission-check-group', '0', 'MKSTREAM')
end
try('ZCARD', KEYS[4])
try('ZADD', KEYS[4], '1', 'm')
try('ZINCRBY', KEYS[4], '1', 'm')
try('ZRANGEBYSCORE', KEYS[4], '-inf', '0')
try('ZCOUNT', KEYS[4], '-inf', '0')
try('ZSCORE', KEYS[4], 'm')
try('ZREM', KEYS[4], 'm')
try('ZREMRANGEBYSCORE', KEYS[4], '-inf', '0')
try('SPUBLISH', ARGV[1], 'permission check')
try('TIME')
try('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return denied
