#!lua flags=allow-cross-slot-keys
--[[
  The write of a fenced hold (strategy `fenced`): a batch of orders, applied only if
  no lock on the product was issued after ours. The fence is checked first, inside
  Redis, in the step that writes (below); the rest is the write every strategy does.

  KEYS[1]  fencing counter   KEYS[2]  stock
  KEYS[3]  buyers hash       KEYS[4]  orders stream
  KEYS[5]  meta hash: perUserLimit; soldBy, the strategy family of the sale; `fence`
           records the last token applied to the product
  KEYS[6]  idempotency hash: Idempotency-Key -> claim or outcome (includes/idempotency-field.lua)
  KEYS[7]  order states hash   KEYS[8]  deadlines zset (the reservation: includes/order-write.lua)
  ARGV[1]  our fencing token
  ARGV[2]  how long an outcome is kept, in ms (the idempotency hash's TTL)
  ARGV[3]  our strategy family: a sale started by another family is not ours to write
  ARGV[4]  '' to judge the sale window by this Redis's clock; else the app's clock in ms
           (SALE_CLOCK=app, the naive check kept to show it selling early)
  ARGV[5]  the shard marks' guess: an index into MARK_TAGS, or '' (includes/shard-marks.lua)
  ARGV[6..] per order, six values: userId, quantity (integer >= 1), orderId,
           Idempotency-Key and claim id ('' and '' for an order sent without a key),
           and the expiry (ms) of the Admission-Pass it was made with ('' for none)
  Returns  {'OK', per order: the stock left after it, or why it was skipped, nothing of it
           written: 'CLAIM_LOST' or 'PASS_EXPIRED' (includes/order-batch.lua)}; each
           stream entry carries `fence` = our token, and meta's `fence` is set to it
           {'STALE_LOCK', newest token}: a later holder exists
           {'SHORT', stock} / {'OVER_LIMIT', userId, units they have}: a holder the
           fence missed wrote in between (below)
           {'STRATEGY_MISMATCH', soldBy}: the sale was started by another family
           {'SALE_NOT_STARTED', startsAt, now} / {'SALE_ENDED', endsAt}: by Redis's clock
           Nothing is written whenever the reply is not OK.
]]

-- The fence. A holder that paused past its TTL (GC, SIGSTOP) may wake up and write after
-- another client took the lock, read the same stock and wrote too: an oversell no
-- client-side check can prevent, because the pause can fall between the check and the
-- write. Here the check is inside Redis, atomic with the write: if the counter has moved
-- past our token, someone acquired the lock after us, whatever they have written so far,
-- and our read may be stale, so nothing is written. (Refusing only tokens older than the
-- last *applied* one, the textbook rule for a plain overwrite, is not enough for
-- read-check-write: the later holder may still be between its read and its write.)
local token = tonumber(ARGV[1])
local newest = tonumber(redis.call('GET', KEYS[1]) or '0')
if newest > token then
  return {'STALE_LOCK', newest}
end

--- @include "includes/sale-window"
--- @include "includes/sale-family"
--- @include "includes/order-batch"

-- The window, judged here by Redis's clock in the step that writes: a holder that read
-- inside it and writes after its end (paused, slow, its lock lost) sells nothing.
local meta = redis.call('HMGET', KEYS[5], 'perUserLimit', 'soldBy', 'startsAt', 'endsAt', 'paymentTimeoutMs')
local now = nowMs()
local refused = familyRefusal(meta[2], ARGV[3]) or windowRefusal(meta[3], meta[4], tonumber(ARGV[4]) or now)
if refused then
  return refused
end
local k = {stock = KEYS[2], buyers = KEYS[3], orders = KEYS[4], idem = KEYS[6], states = KEYS[7], deadlines = KEYS[8],
  marks = shardMarks(ARGV[5], KEYS[4])}
local orders = batchOrders(6, k, now)
-- Stock and limits are checked here too, not only by the holder: whenever the fence
-- misses a second holder (a lost counter, a failover that lost the last acquisition),
-- this is what still stops an oversell and a limit exceeded. The holder's own check
-- rules both out, so SHORT or OVER_LIMIT means another holder wrote in between.
local limit = tonumber(meta[1] or '0')
local total = 0
local owned = {}
for _, o in ipairs(orders) do
  if not o.skipped then
    local quantity = tonumber(o.quantity)
    total = total + quantity
    owned[o.userId] = (owned[o.userId] or tonumber(redis.call('HGET', KEYS[3], o.userId) or '0')) + quantity
    if owned[o.userId] > limit then
      return {'OVER_LIMIT', o.userId, owned[o.userId] - quantity}
    end
  end
end
local stock = tonumber(redis.call('GET', KEYS[2]) or '0')
if stock < total then
  return {'SHORT', stock}
end
redis.call('HSET', KEYS[5], 'fence', ARGV[1])
local deadline = paymentDeadline(meta[5], now)
local replies = {'OK'}
for _, o in ipairs(orders) do
  replies[#replies + 1] = o.skipped or writeOrder(k, o, deadline, ARGV[2], 'fence', ARGV[1])
end
return replies
