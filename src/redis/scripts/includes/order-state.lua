--[[
  An order's state in a product's order states hash, its one definition:
    <status>|<userId>|<quantity>[|<paymentId>]   status R (reserved), P (paid),
                                                  C (cancelled), E (expired)
  A reservation (R) holds its units until it is paid, cancelled or its payment deadline
  passes (order-outcome-6.lua); the deadline, in the deadlines zset, is Redis's clock.
]]
local function stateRecord(status, userId, quantity, paymentId)
  local record = status .. '|' .. userId .. '|' .. quantity
  if paymentId then
    record = record .. '|' .. paymentId
  end
  return record
end

-- A record's status, userId, quantity and paymentId ('' when it has none).
local function parseState(record)
  return string.match(record, '^(%u)|([^|]*)|(%d+)|?(.*)$')
end
