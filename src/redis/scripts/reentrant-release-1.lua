--[[
  Leave a reentrant lock once (Redisson's unlockInnerAsync): decrement our hold
  count; at zero delete the lock and SPUBLISH, so waiters wake now instead of at the
  end of their bounded wait. Only the owner can touch it.

  KEYS[1]  lock hash
  ARGV[1]  owner id
  ARGV[2]  TTL in ms (renewed while holds remain)
  ARGV[3]  channel the waiters of this lock subscribe to
  ARGV[4]  'all' to leave every hold this owner has at once (its hold count is not
           known: a re-entry whose reply was lost may or may not have counted one more);
           anything else leaves one
  Returns  nil if the lock is not ours (expired or taken by someone else);
           0 if we still hold it (count > 0); 1 if it is now free.
]]
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return nil
end
if ARGV[4] ~= 'all' and redis.call('HINCRBY', KEYS[1], ARGV[1], -1) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('SPUBLISH', ARGV[3], 'released')
return 1
