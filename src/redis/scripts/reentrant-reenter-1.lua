--[[
  Re-enter a reentrant lock the owner holds (Redisson's RLock, re-entry): count it
  up and renew its TTL, only if this owner still holds it. Taking the lock afresh
  here, as an acquire would when the key is gone, would hide that the outer hold was
  lost: another owner may have held the lock meanwhile and written.

  KEYS[1]  lock hash
  ARGV[1]  owner id (process id + async context id)
  ARGV[2]  TTL in ms
  Returns  1 when re-entered; 0 when the lock is no longer this owner's (nothing changed).
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
