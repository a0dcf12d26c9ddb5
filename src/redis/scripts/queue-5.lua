--[[
  A product's waiting room, joined or read in one step with its admissions: buyers are
  admitted in the order they joined, at the sale's rate (a token bucket holding at most
  one second of admissions), and only while the stock left can serve every pass not yet
  used in full (outstanding passes x perUserLimit <= stock left: a pass may buy up to the
  limit; a remainder below the limit gets one pass, which buys what is left; a pass that
  expires unused frees its place for the next in line). Nobody is admitted before the
  sale's start (by Redis's clock): a pass issued then would lapse unused while its buyer
  waits for the opening, and its place would be lost; the bucket fills meanwhile, so the
  first second's buyers are admitted at the start. Nobody is admitted after the sale's
  end either: a buyer with no ticket who joins then is refused SALE_ENDED and not
  enrolled, and every ticket reads `ended` (but a pass that bought, `used`), so nobody
  waits for a sale that is over. Admission happens whenever anyone joins or reads the queue, so it
  needs no process of its own: an app that dies loses no place, and every instance
  admits the same buyers in the same order. Redis's clock decides.

  KEYS[1]  meta hash: perUserLimit, queueRate, passTtlMs, startsAt, endsAt (reset-sale-10.lua); queueJoined,
           queueAdmitted, queueTokens, queueAt (this script's counters)
  KEYS[2]  stock (of a product of one bucket; see `count`)
  KEYS[3]  waiting-room hash (key-layout.ts: t:<ticket>, u:<userId>, n:<position>, x:<pass>, y:<pass>)
  KEYS[4]  outstanding passes zset: pass -> expires at (ms)
  KEYS[5]  idempotency hash: a pass's purchase is claimed, then decided, under `pass <pass>`
  ARGV[1]  'join' or 'read'
  join: ARGV[2] userId, ARGV[3] a new ticket, ARGV[4] a new pass (random, from the app;
        used only if the user has no ticket yet: joining again returns the same one).
        A buyer with no ticket who joins once nothing is left is refused and not
        enrolled: SOLD_OUT, so the tail of a sale writes nothing (and the door can
        repeat it, door-refusals.ts); a buyer who holds a ticket gets it back as ever
  read: ARGV[2] ticket
  count: the last ARGV (ARGV[5] of a join, ARGV[3] of a read): '' to go by the stock
        (KEYS[2]). A product of several escrow buckets, whose other buckets are on other
        shards: `<units>|<moving>|<usedAt>|<epoch>|<countedAt>|<fresh>`, the app's count
        just before (src/door/waiting-room.ts countNow(), src/orders/escrow.ts left()):
        the units in every bucket, the moves in flight landed first, read twice with no
        move between (so none counted twice, and 0 only when all are dry; `moving`: 1 if
        moves are in flight that could not land, their units not counted, the product
        never taken for sold out); and, read first, in one step on this shard, meta's
        queueUsed (units bought with passes marked used since, pass-used-3.lua: their
        orders may have come after their bucket was read, while their passes no longer
        count as outstanding, so they are subtracted from the room), the sale's epoch
        and Redis's clock (a pass that lapsed after it may have bought after its bucket
        was read: it still holds its units back for that count; lapsed passes are kept
        KEEP_LAPSED_MS for it); `fresh`: 1 if the count began during this request, 0 if
        the app kept it from before. RECOUNT (nothing written) for a count of another
        sale, a one-bucket count ('') of a product sold from buckets or the reverse, one
        older than KEEP_LAPSED_MS, or a kept one with nothing left to serve (what is
        left, if anything, only a count begun during the request may say)
  Returns  {state, ticket, position, pass, passExpiresAt, admitPerSecond, userId, opensInMs}
             state: waiting (position: 1 = next), admitted (pass, passExpiresAt: ms),
             expired (the pass lapsed unused), sold_out (nothing left to admit for),
             ended (the sale's end has passed), used (the pass bought);
             pass '' and passExpiresAt 0 unless admitted; opensInMs: how long until
             the sale starts (0 once it has), which a waiting place waits on top
           {'UNKNOWN_PRODUCT'}   {'NO_QUEUE'}   {'UNKNOWN_TICKET'}   {'SOLD_OUT'} (join only)
           {'RECOUNT'}: nothing written; count afresh and ask again (`count` above)
           {'SALE_ENDED', endsAt} (join only: a buyer with no ticket after the end)
]]
--- @include "includes/clock"
--- @include "includes/idempotency-field"

local meta = redis.call('HMGET', KEYS[1], 'initialStock', 'queueRate', 'passTtlMs',
  'queueJoined', 'queueAdmitted', 'queueTokens', 'queueAt', 'perUserLimit', 'startsAt', 'endsAt', 'queueUsed', 'epoch',
  'buckets')
if not meta[1] then
  return {'UNKNOWN_PRODUCT'}
end
if not meta[2] then
  return {'NO_QUEUE'}
end
local rate = tonumber(meta[2])
local ttl = tonumber(meta[3])
local joined = tonumber(meta[4] or '0')
local admitted = tonumber(meta[5] or '0')
local now = nowMs()
-- The bucket starts full: the first second's buyers go in at once.
local tokens = tonumber(meta[6] or tostring(rate))
local at = tonumber(meta[7] or tostring(now))
tokens = math.min(rate, tokens + math.max(0, now - at) * rate / 1000)
local endsAt = tonumber(meta[10] or '')
local ended = endsAt ~= nil and now >= endsAt

-- The units left: the stock, or the app's count over the buckets (`count` above).
local count = ARGV[3]
if ARGV[1] == 'join' then
  count = ARGV[5]
end
local bucketed = count ~= nil and count ~= ''
local counted, moving, usedAt, countEpoch, countedAt, fresh
if bucketed then
  counted, moving, usedAt, countEpoch, countedAt, fresh =
    string.match(count, '^(%d+)|([01])|(%d+)|([^|]*)|(%d+)|([01])$')
  counted, usedAt, countedAt = tonumber(counted), tonumber(usedAt), tonumber(countedAt)
end
-- How long a lapsed pass stays in the outstanding set of a product of several buckets (ms): see `count`.
local KEEP_LAPSED_MS = 10000
-- What the count can still serve: less the units bought with passes marked used since it began.
local serves = 0
if bucketed then
  serves = counted - (tonumber(meta[11] or '0') - usedAt)
end
-- Counted again (RECOUNT, nothing written): a one-bucket count of a product now sold from
-- buckets or the reverse, or a count of another sale (a PUT or DELETE since the app read
-- it), one older than the lapsed passes this queue still keeps (below), or one the app
-- kept from before this request with nothing left to serve (what is left, if anything,
-- only a count begun during the request may say: a SOLD_OUT, a ticket's sold_out).
local fromBuckets = meta[13] ~= false and meta[13] ~= ''
if bucketed ~= fromBuckets or bucketed and (meta[12] ~= countEpoch or countedAt < now - KEEP_LAPSED_MS
    or fresh == '0' and serves <= 0) then
  return {'RECOUNT'}
end
local function unitsLeft()
  if bucketed then
    -- Units of moves that could not land yet are not counted, but they are not none.
    return math.max(counted, moving == '1' and 1 or 0)
  end
  return tonumber(redis.call('GET', KEYS[2]) or '0')
end

local ticket
if ARGV[1] == 'join' then
  ticket = redis.call('HGET', KEYS[3], 'u:' .. ARGV[2])
  if not ticket then
    if ended then
      return {'SALE_ENDED', endsAt}
    end
    if unitsLeft() <= 0 then
      return {'SOLD_OUT'}
    end
    ticket = ARGV[3]
    joined = joined + 1
    redis.call('HSET', KEYS[3], 't:' .. ticket, joined .. '|' .. ARGV[2] .. '|' .. ARGV[4],
      'u:' .. ARGV[2], ticket, 'n:' .. joined, ticket)
  end
else
  ticket = ARGV[2]
end

-- Passes that lapsed unused no longer hold units back (over buckets, those that lapsed
-- before the count began: see `count`). (A used pass is removed by the purchase that
-- used it; one whose removal was lost holds its place until it expires.)
local outstanding
if bucketed then
  -- A pass that lapsed after the count began may have bought after its bucket was read,
  -- its mark not landed: its units may be in the count, so it still holds them back for
  -- that count; for a count begun after its lapse it holds nothing. Kept KEEP_LAPSED_MS.
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now - KEEP_LAPSED_MS)
  outstanding = redis.call('ZCOUNT', KEYS[4], '(' .. countedAt, '+inf')
else
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  outstanding = redis.call('ZCARD', KEYS[4])
end
local stock = unitsLeft()
if not bucketed then
  serves = stock
end
-- Passes the stock left can serve in full; a remainder below the limit gets one pass of
-- its own (it buys what is left), so the last units are sold and no ticket waits forever.
local room = math.max(math.floor(serves / tonumber(meta[8] or '1')), serves > 0 and 1 or 0) - outstanding
local opensIn = math.max(0, tonumber(meta[9] or '0') - now)
local n = math.min(math.floor(tokens), room, joined - admitted)
if opensIn > 0 or ended then
  n = 0
end
for _ = 1, n do
  admitted = admitted + 1
  local next = redis.call('HGET', KEYS[3], 'n:' .. admitted)
  local position, user, pass = string.match(redis.call('HGET', KEYS[3], 't:' .. next), '^([^|]*)|([^|]*)|(.*)$')
  redis.call('HSET', KEYS[3], 'x:' .. pass, next .. '|' .. user .. '|' .. (now + ttl))
  redis.call('ZADD', KEYS[4], now + ttl, pass)
  tokens = tokens - 1
end
redis.call('HSET', KEYS[1], 'queueJoined', joined, 'queueAdmitted', admitted, 'queueTokens', tostring(tokens), 'queueAt', now)

local record = redis.call('HGET', KEYS[3], 't:' .. ticket)
if not record then
  return {'UNKNOWN_TICKET'}
end
local position, owner, pass = string.match(record, '^([^|]*)|([^|]*)|(.*)$')
position = tonumber(position)
if position <= admitted then
  local outcome = redis.call('HGET', KEYS[5], 'pass ' .. pass)
  -- Or marked used by its purchase (y:<pass>, best effort): a product of several escrow
  -- buckets keeps the pass's outcome in its buyer's home bucket, on another shard.
  if outcome and isOutcome(outcome) or bucketed and redis.call('HEXISTS', KEYS[3], 'y:' .. pass) == 1 then
    -- Used: its order was written. Whatever the stock or the time, the pass has bought.
    return {'used', ticket, 0, '', 0, rate, owner}
  end
end
-- After the end, every place that did not buy: nobody waits for a sale that is over.
if ended then
  return {'ended', ticket, 0, '', 0, rate, owner}
end
if position > admitted then
  return {stock > 0 and 'waiting' or 'sold_out', ticket, position - admitted, '', 0, rate, owner, opensIn}
end
local expires = tonumber(string.match(redis.call('HGET', KEYS[3], 'x:' .. pass), '([^|]*)$'))
if now >= expires then
  return {'expired', ticket, 0, '', 0, rate, owner}
end
if stock <= 0 then
  return {'sold_out', ticket, 0, '', 0, rate, owner}
end
return {'admitted', ticket, 0, pass, expires, rate, owner}
