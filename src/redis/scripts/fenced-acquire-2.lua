--[[
  Take a lock and a fencing token in one step (strategy `fenced`): the same
  SET NX PX as the plain lock, and, only if it succeeded, the next number of the
  product's fencing counter. Every acquisition of the product's lock, by anyone,
  gets a larger token than the one before, so a write can tell whether a later
  holder exists.

  KEYS[1]  lock key          KEYS[2]  fencing counter (never reset, never decreases)
  ARGV[1]  owner token       ARGV[2]  TTL in ms
  Returns  the fencing token (integer >= 1) if the lock is now ours, nil if it is held.
]]
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return nil
