#!lua flags=no-writes
--[[
  A product's sale as GET /api/products/:id shows it, read in one step (never half of
  one sale and half of the next, whatever restarts meanwhile) and, being declared
  `no-writes`, answered even while Redis refuses writes for memory (OOM): a read is
  never refused for lack of memory.

  KEYS[1]  meta hash   KEYS[2]  stock   KEYS[3]  order states hash
  ARGV[1]  unused ('')
  Returns  {initialStock, perUserLimit, paymentTimeoutMs, startsAt, endsAt, queueRate,
            passTtlMs, buckets (bucket 0's list of the other buckets: src/sale/buckets.ts)
            (each false when absent), stock (false: no sale), orders (the
            states hash's length), Redis's clock in ms}
]]
--- @include "includes/clock"

local meta = redis.call('HMGET', KEYS[1], 'initialStock', 'perUserLimit', 'paymentTimeoutMs', 'startsAt', 'endsAt',
  'queueRate', 'passTtlMs', 'buckets')
meta[9] = redis.call('GET', KEYS[2])
meta[10] = redis.call('HLEN', KEYS[3])
meta[11] = nowMs()
return meta
