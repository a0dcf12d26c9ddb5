--[[
  Note how many replicas acknowledged the order an Idempotency-Key holds
  (REDIS_WAIT_REPLICAS, src/orders/replica-acks.ts), so that a retry is answered that
  order again without another WAIT, even while its master lacks replicas. The note is
  the field `<key> acknowledged` of the same hash (a key never holds a space: see
  idempotency-claim-3.lua). Written only while the key still holds that very order, and
  never on a hash that is gone: it keeps the hash's TTL and never marks another order.

  KEYS[1]  idempotency hash
  ARGV[1]  Idempotency-Key   ARGV[2]  orderId   ARGV[3]  replicas that acknowledged it
  Returns  1 if noted; 0 if the key no longer holds that order
]]
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held and string.match(held, '^D|[^|]*|([^|]*)|') == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1] .. ' acknowledged', ARGV[3])
  return 1
end
return 0
