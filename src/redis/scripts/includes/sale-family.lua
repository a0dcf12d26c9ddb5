--[[
  The strategy family that sells a sale (meta's soldBy, recorded by reset-sale-10.lua):
  instances of another family exclude each other another way (a lock, a fence, one
  script), so their purchases and ours would exclude nothing. A sale that recorded
  none is anyone's.
]]
-- {'STRATEGY_MISMATCH', soldBy} when the sale is another family's than `family`, else nil.
local function familyRefusal(soldBy, family)
  if soldBy and soldBy ~= family then
    return {'STRATEGY_MISMATCH', soldBy}
  end
  return nil
end
