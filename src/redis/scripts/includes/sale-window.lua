--[[
  The sale window, judged by this Redis's clock in the step that writes (never by an
  app's clock, which may run ahead): an order decided inside the window and written
  after its end sells nothing. Shared by every script that writes an order.
]]
-- Redis's clock, in ms.
local function nowMs()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

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
