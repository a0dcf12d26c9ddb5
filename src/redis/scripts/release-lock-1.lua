--[[
  Release a lock only if we still own it (compare-and-delete).

  A plain DEL would delete whoever holds the lock now: if our hold outlived its TTL
  and another client took the lock, DEL removes *their* lock and lets a third client
  in beside them. GET-then-DEL from the client has the same race between the two
  commands. Doing the compare and the delete in one script makes it atomic.

  Waiters in other processes subscribe to ARGV[2] and try again the moment the lock
  is freed, instead of polling (Redisson's unlock message).

  KEYS[1]  lock key
  ARGV[1]  owner token set by SET ... NX PX
  ARGV[2]  channel to announce the release on
  Returns  1 if the lock was ours and is now deleted (and announced), 0 if it was not
           ours (expired or taken by another owner) and nothing was changed.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SPUBLISH', ARGV[2], 'released')
  return 1
end
return 0
