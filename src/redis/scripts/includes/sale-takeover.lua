--[[
  A reset or a deletion of a sale runs under its caller's family's exclusion (a lock, or
  none for the lock-free families): a buyer of another family may be between its read
  and its write, so a sale another family sells is refused unless the operator says
  none of its instances is left (`takeover` '1').
]]
--- @include "includes/sale-family"

-- {'STRATEGY_MISMATCH', soldBy} when the sale (meta hash `meta`) is another family's than
-- `family` ('' : the caller records none, anyone's) and `takeover` is not '1', else nil.
local function takeoverRefusal(meta, family, takeover)
  if family == '' or takeover == '1' then
    return nil
  end
  return familyRefusal(redis.call('HGET', meta, 'soldBy'), family)
end
