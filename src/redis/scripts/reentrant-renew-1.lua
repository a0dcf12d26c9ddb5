--[[
  Watchdog renewal (Redisson's renewExpirationAsync): push the TTL out again, but
  only while the lock is still ours.

  KEYS[1]  lock hash
  ARGV[1]  owner id
  ARGV[2]  TTL in ms
  Returns  1 if renewed, 0 if the lock is no longer ours (the hold is lost).
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
