--[[
  Take or re-enter a reentrant lock (Redisson's RLock, tryLockInnerAsync): the lock
  is a hash whose field is the owner id and whose value is the hold count. The
  owner that holds it may take it again; anyone else waits. Every successful call
  (re)sets the TTL, so the lock can never exist without one.

  KEYS[1]  lock hash
  ARGV[1]  owner id (process id + async context id)
  ARGV[2]  TTL in ms
  Returns  nil when acquired (or re-entered); otherwise the ms left on the
           other owner's lock (PTTL), for a bounded wait.
]]
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return nil
end
return redis.call('PTTL', KEYS[1])
