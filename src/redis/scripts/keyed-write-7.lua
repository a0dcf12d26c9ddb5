#!lua flags=allow-cross-slot-keys
--[[
  The write of an unfenced hold (`lock`, `reentrant`, `redlock`, the mistakes) when a
  batch has orders sent with an Idempotency-Key: each keyed order is written only while
  its claim is still the one its request made, as fenced-write-8.lua and purchase-7.lua
  check it. A MULTI cannot: a write delayed past the claim's lapse (its holder stalled,
  its bytes held in the network) would land beside the order of the retry that took the
  claim over, two orders for one key. Nothing else is checked here: stock and limits
  are the lock's to protect (that an unfenced late write can still oversell is what
  `lock` teaches); a batch without keys is written with a plain MULTI.

  KEYS[1]  stock   KEYS[2]  buyers hash   KEYS[3]  orders stream
  KEYS[4]  idempotency hash (includes/idempotency-field.lua)
  KEYS[5]  meta hash: paymentTimeoutMs, startsAt, endsAt   KEYS[6]  order states hash   KEYS[7]  deadlines zset
  ARGV[1]  how long an outcome is kept, in ms (the idempotency hash's TTL)
  ARGV[2]  '' to judge the sale window by this Redis's clock; else the app's clock in ms
           (SALE_CLOCK=app, the naive check kept to show it selling early)
  ARGV[3]  the shard marks' guess: an index into MARK_TAGS, or '' (includes/shard-marks.lua)
  ARGV[4..] per order, six values: userId, quantity (integer >= 1), orderId,
           Idempotency-Key and claim id ('' and '' for an order without a key), and
           the expiry (ms) of the Admission-Pass it was made with ('' for none)
  Returns  per order: the stock left after it (below 0 when a late write oversold:
           nothing here stops it), or why it was skipped (nothing of it written), as
           fenced-write-8.lua says it: 'CLAIM_LOST' (its claim is no longer its
           request's), 'PASS_EXPIRED' (its pass lapsed by Redis's clock before this write)
           {'SALE_NOT_STARTED', startsAt, now} / {'SALE_ENDED', endsAt}: the window, judged
           here by Redis's clock in the step that writes, so a holder that read inside it
           and writes after its end (paused, slow) sells nothing; nothing written
]]
--- @include "includes/sale-window"
--- @include "includes/order-batch"

local meta = redis.call('HMGET', KEYS[5], 'paymentTimeoutMs', 'startsAt', 'endsAt')
local now = nowMs()
local closed = windowRefusal(meta[2], meta[3], tonumber(ARGV[2]) or now)
if closed then
  return closed
end
local k = {stock = KEYS[1], buyers = KEYS[2], orders = KEYS[3], idem = KEYS[4], states = KEYS[6], deadlines = KEYS[7],
  marks = shardMarks(ARGV[3], KEYS[3])}
local deadline = paymentDeadline(meta[1], now)
local replies = {}
for _, o in ipairs(batchOrders(4, k, now)) do
  replies[#replies + 1] = o.skipped or writeOrder(k, o, deadline, ARGV[1])
end
return replies
