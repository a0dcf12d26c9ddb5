--[[
  Give up a claim on an Idempotency-Key (idempotency-claim-3.lua): the request was
  refused with nothing written, or its write's answer was lost. Deleted only if it is
  still this request's claim: an outcome (D|...) or another request's claim stays.
  Once it is gone, this request's write, should it still arrive, writes nothing
  (the write scripts check the claim), so a retry decides the key afresh.

  KEYS[1]  idempotency hash
  ARGV[1]  Idempotency-Key   ARGV[2]  claim id
  Returns  1 if the claim was given up; 0 if it was no longer this request's
]]
--- @include "includes/idempotency-field"

if isClaimOf(redis.call('HGET', KEYS[1], ARGV[1]), ARGV[2]) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 1
end
return 0
