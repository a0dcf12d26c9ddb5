--[[
  Take a lock and a fencing token in one step (strategy `fenced`): the same
  SET NX PX as the plain lock, and, only if it succeeded, the next number of the
  product's fencing counter. Every acquisition of the product's lock, by anyone,
  gets a larger token than the one before, so a write can tell whether a later
  holder exists.

  The counter is never handed out below the last token a write applied (meta's
  `fence`): if the counter key was lost (evicted, deleted by hand) it would restart at
  1, and a paused holder's old, larger token would pass every later holder's check.
  (What this cannot restore is a token issued but never applied; the fencing counter
  must not be evictable: the app refuses a Redis whose maxmemory-policy evicts.)

  KEYS[1]  lock key          KEYS[2]  fencing counter (never reset, never decreases)
  KEYS[3]  meta hash: `fence` is the last token a write applied
  ARGV[1]  owner token       ARGV[2]  TTL in ms
  Returns  the fencing token (integer >= 1) if the lock is now ours, nil if it is held.
]]
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local token = redis.call('INCR', KEYS[2])
  local applied = tonumber(redis.call('HGET', KEYS[3], 'fence') or '0')
  if token <= applied then
    token = applied + 1
    redis.call('SET', KEYS[2], token)
  end
  return token
end
return nil
