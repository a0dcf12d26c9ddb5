--[[
  Redis's clock, in ms. Every decision a script makes by time (a sale's window, a pass's
  expiry, a payment deadline, a claim in flight, the waiting room's rate) is judged by
  the clock of the Redis that holds the sale, never by an app's, which may run ahead.
]]
local function nowMs()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
