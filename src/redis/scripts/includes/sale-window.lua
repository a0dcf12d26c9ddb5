--[[
  The sale window, judged by this Redis's clock in the step that writes (never by an
  app's clock, which may run ahead): an order decided inside the window and written
  after its end sells nothing. Shared by every script that writes an order.
]]
--- @include "includes/clock"

-- The refusal when `now` (ms) is outside [startsAt, endsAt) (meta's fields, nil when the
-- sale has none), else nil: {'SALE_NOT_STARTED', startsAt, now} or {'SALE_ENDED', endsAt}.
local function windowRefusal(startsAt, endsAt, now)
  if startsAt and now < tonumber(startsAt) then
    return {'SALE_NOT_STARTED', tonumber(startsAt), now}
  end
  if endsAt and now >= tonumber(endsAt) then
    return {'SALE_ENDED', tonumber(endsAt)}
  end
  return nil
end
