--[[
  The order log's `settle` consumer group (src/settlement/settler.ts), which a sale's
  reset and a product's deletion ask what PostgreSQL lacks: its XINFO GROUPS fields by
  name (pending, last-delivered-id, lag: nil where Redis cannot count, after a
  deletion), or nil when the stream has no such group, or there is no stream.
]]
local function settleGroup(stream)
  if redis.call('EXISTS', stream) == 0 then
    return nil
  end
  for _, group in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    local g = {}
    for i = 1, #group, 2 do
      g[group[i]] = group[i + 1]
    end
    if g['name'] == 'settle' then
      return g
    end
  end
  return nil
end
