--[[
  Adds what one app instance answered for a product since its last publish (a
  quarter second) to the product's live hash, and sets what that instance says of
  itself, in one step. Runs once per product per tick, never per request (and every
  tick while buyers wait in the instance: its heartbeat).
  Writes nothing for a product without a sale: a buyer may name any valid id, and
  the app must not create keys for it (the live hash would outlive the request).
  Drops the answers when they belong to another sale than the current one (another
  instance restarted it since): they were counted in the last sale, which is gone.

  KEYS[1]  meta hash (its presence is what makes a product known; its saleId field
           the sale that is on, reset-sale-10.lua)
  KEYS[2]  live hash: <instance>|<CODE> -> answers in this sale, and
           <instance>|pid, <instance>|waiting, <instance>|lostLocks, <instance>|seen
  ARGV[1]  instance id (<hostname>/<pid>)
  ARGV[2]  its pid
  ARGV[3]  buyers waiting in that instance now (arrived, not yet answered)
  ARGV[4]  its lost locks so far (all products)
  ARGV[5]  now, ms since the epoch by the instance's clock
  ARGV[6]  the live hash's time to live in ms, renewed by each publish
  ARGV[7]  the sale id the answers were counted in, '' when the instance does not
           know it yet (then they count in the current sale)
  ARGV[8..] CODE, count pairs: answers since the last publish
  Returns  the current sale id ('' for a sale started before sale ids), or nil
           (null) if the product has no sale
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return nil
end
local current = redis.call('HGET', KEYS[1], 'saleId') or ''
local instance = ARGV[1] .. '|'
if ARGV[7] == '' or ARGV[7] == current then
  for i = 8, #ARGV, 2 do
    redis.call('HINCRBY', KEYS[2], instance .. ARGV[i], ARGV[i + 1])
  end
end
redis.call('HSET', KEYS[2], instance .. 'pid', ARGV[2], instance .. 'waiting', ARGV[3],
  instance .. 'lostLocks', ARGV[4], instance .. 'seen', ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[6])
return current
