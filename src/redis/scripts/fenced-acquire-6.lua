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

  A batch of buyers also takes its read here, when it names one (ARGV[3] on): the
  sale as the hold would read it first thing, read in the step that takes the lock,
  so it is a read under the lock, one round trip and one MULTI fewer per hold
  (src/orders/sale-store.ts, readSale(), reads the same fields the same way).

  KEYS[1]  lock key          KEYS[2]  fencing counter (never reset, never decreases)
  KEYS[3]  meta hash: `fence` is the last token a write applied
  KEYS[4]  stock             KEYS[5]  buyers hash   KEYS[6]  idempotency hash
  ARGV[1]  owner token       ARGV[2]  TTL in ms
  ARGV[3]  '' to read nothing; else how many buyers' counts to read, whose userIds
           follow; the rest are Idempotency-Keys whose fields to read
  Returns  nil if the lock is held. Else {token}, the fencing token (integer >= 1), and
           with a read {token, meta: perUserLimit, soldBy, saleId, startsAt, endsAt,
           queueRate, epoch; stock; Redis's clock in ms; the buyers' counts; the keys' fields}.
]]
--- @include "includes/clock"

if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return nil
end
local token = redis.call('INCR', KEYS[2])
local applied = tonumber(redis.call('HGET', KEYS[3], 'fence') or '0')
if token <= applied then
  token = applied + 1
  redis.call('SET', KEYS[2], token)
end
if ARGV[3] == '' then
  return {token}
end
local buyers = tonumber(ARGV[3])
local users, keys = {}, {}
for i = 4, #ARGV do
  if i < 4 + buyers then users[#users + 1] = ARGV[i] else keys[#keys + 1] = ARGV[i] end
end
return {
  token,
  redis.call('HMGET', KEYS[3], 'perUserLimit', 'soldBy', 'saleId', 'startsAt', 'endsAt', 'queueRate', 'epoch'),
  redis.call('GET', KEYS[4]),
  nowMs(),
  #users > 0 and redis.call('HMGET', KEYS[5], unpack(users)) or {},
  #keys > 0 and redis.call('HMGET', KEYS[6], unpack(keys)) or {},
}
