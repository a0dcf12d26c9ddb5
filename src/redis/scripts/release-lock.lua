--[[
  Release a lock only if we still own it (compare-and-delete).

  A plain DEL would delete whoever holds the lock now: if our hold outlived its TTL
  and another client took the lock, DEL removes *their* lock and lets a third client
  in beside them. GET-then-DEL from the client has the same race between the two
  commands. Doing the compare and the delete in one script makes it atomic.

  KEYS[1]  lock key
  ARGV[1]  owner token set by SET ... NX PX
  Returns  1 if the lock was ours and is now deleted, 0 if it was not ours (expired
           or taken by another owner) and nothing was changed.
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
