--[[
  Claim an Idempotency-Key for one request (IETF httpapi "The Idempotency-Key HTTP
  Header Field"), or say what became of it. A field of the product's idempotency
  hash holds, per key, a claim (a request is deciding it) or an outcome (its order was
  written), as includes/idempotency-field.lua writes and reads them, and, beside an
  outcome, the field `<key> acknowledged` (a key never holds a space)
  says how many replicas acknowledged its order (idempotency-acknowledged-1.lua).
  The write that places the order replaces the claim with the outcome in the same
  script (includes/order-write.lua), only while the claim is its own.

  KEYS[1]  idempotency hash
  KEYS[2]  waiting-room hash (queue-5.lua: x:<pass> -> <place>|<userId>|<expires at, ms>)
  KEYS[3]  meta hash: `epoch`, the sale of a product of several escrow buckets (ARGV[9])
  ARGV[1]  Idempotency-Key   ARGV[2]  claim id (new, random)   ARGV[3]  fingerprint
  ARGV[4]  how long this claim may stay in flight, in ms, by the claimer's own settings
           (stored in the claim, so a retry from an app configured otherwise judges
           it by the same deadline; after it a retry takes the claim over)
  ARGV[5]  how long the hash is kept after its last claim, in ms
  ARGV[6]  an Admission-Pass, or '': then the key is claimed only if the pass is one this
           product's queue issued to ARGV[7] (the buyer) and has not lapsed by Redis's
           clock. Checked once the key is known to be undecided, so a retry of a pass
           that bought is answered its order whatever the pass's state now; and checked
           in the same step as the claim, so no other request can use it meanwhile
  ARGV[7]  the buyer (with a pass)
  ARGV[8]  '' to read the pass's record here (KEYS[2]); else the record as the app read
           it from the queue's own bucket, another shard (a product of several escrow
           buckets, whose key lives in the buyer's home bucket: src/orders/idempotency.ts),
           or '-' for none there. Judged here as a record read here would be, once the key
           is known to be undecided: the home bucket's hash decides the pass's one order
  ARGV[9]  with ARGV[8]: the sale's epoch as bucket 0 said it with the record; a pass of
           another sale (a PUT between the read and this claim) is no pass of this one
  Returns  {'CLAIMED', passExpiresAt}: this request decides the key (passExpiresAt: when
             the pass lapses, ms, which the write checks again; 0 without a pass)
           {'PASS_INVALID', why}: nothing claimed; why: unknown, owner or expired
           {'DONE', orderId, quantity, remaining, acknowledged}: the order was written;
             answer it again (acknowledged: by how many replicas, 0 if not noted)
           {'MISMATCH'}: the key was used with another request
           {'IN_FLIGHT', ms}: another request with this key is still being decided
]]
--- @include "includes/clock"
--- @include "includes/idempotency-field"

local now = nowMs()
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held then
  if isOutcome(held) then
    local fingerprint, orderId, quantity, remaining = parseOutcome(held)
    if fingerprint ~= ARGV[3] then
      return {'MISMATCH'}
    end
    local acknowledged = tonumber(redis.call('HGET', KEYS[1], ARGV[1] .. ' acknowledged')) or 0
    return {'DONE', orderId, tonumber(quantity), tonumber(remaining), acknowledged}
  end
  local untilMs, fingerprint = parseClaim(held)
  if fingerprint ~= ARGV[3] then
    return {'MISMATCH'}
  end
  if now < tonumber(untilMs) then
    return {'IN_FLIGHT', tonumber(untilMs) - now}
  end
  -- Abandoned (its process died mid-purchase): this request takes it over, and the
  -- old claim's write, should it still arrive, no longer matches.
end
local passExpiresAt = 0
if ARGV[6] ~= '' then
  local record
  if ARGV[8] == nil or ARGV[8] == '' then
    record = redis.call('HGET', KEYS[2], 'x:' .. ARGV[6])
  elseif ARGV[8] ~= '-' and redis.call('HGET', KEYS[3], 'epoch') == ARGV[9] then
    record = ARGV[8]
  end
  local owner, expires
  if record then
    owner, expires = string.match(record, '^[^|]*|([^|]*)|(.*)$')
  end
  -- A record without a readable expiry is no pass this script can vouch for.
  if not owner or not tonumber(expires) then
    return {'PASS_INVALID', 'unknown'}
  end
  if owner ~= ARGV[7] then
    return {'PASS_INVALID', 'owner'}
  end
  passExpiresAt = tonumber(expires)
  if now >= passExpiresAt then
    return {'PASS_INVALID', 'expired'}
  end
end
redis.call('HSET', KEYS[1], ARGV[1], claimRecord(ARGV[2], now + tonumber(ARGV[4]), ARGV[3]))
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {'CLAIMED', passExpiresAt}
