--[[
  An Idempotency-Key's field in a product's idempotency hash, its one definition:
    P|<claim id>|<in flight until, ms>|<fingerprint>   a request is deciding it (idempotency-claim-3.lua)
    D|<fingerprint>|<orderId>|<quantity>|<remaining>   its order was written
  An order sent with a key is written only while the key's field is still the claim its
  request made: a claim given up (the write's answer was lost) or taken over by a retry
  means another request decides that key. The write replaces the claim with the outcome
  in the same step, so a retry is answered the order, never a second one.
]]
local function claimRecord(claimId, untilMs, fingerprint)
  return 'P|' .. claimId .. '|' .. untilMs .. '|' .. fingerprint
end

-- Whether the field `held` (false or nil: none) is still the claim `claimId` made.
local function isClaimOf(held, claimId)
  local mine = 'P|' .. claimId .. '|'
  return held ~= false and held ~= nil and string.sub(held, 1, #mine) == mine
end

-- A claim's in-flight deadline (ms) and fingerprint.
local function parseClaim(held)
  return string.match(held, '^P|[^|]*|([^|]*)|(.*)$')
end

-- Whether the field `held` is an outcome (the key's order was written).
local function isOutcome(held)
  return string.sub(held, 1, 2) == 'D|'
end

-- An outcome's fingerprint, orderId, quantity and remaining stock.
local function parseOutcome(held)
  return string.match(held, '^D|([^|]*)|([^|]*)|([^|]*)|(.*)$')
end

-- The order's outcome in place of its claim `held`, the hash kept `ttlMs` from now.
local function recordOutcome(idem, key, held, orderId, quantity, remaining, ttlMs)
  local _, fingerprint = parseClaim(held)
  redis.call('HSET', idem, key, 'D|' .. fingerprint .. '|' .. orderId .. '|' .. quantity .. '|' .. remaining)
  redis.call('PEXPIRE', idem, ttlMs)
end
