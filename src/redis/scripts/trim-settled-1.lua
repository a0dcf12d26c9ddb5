--[[
  Trims a product's order stream of what every consumer group has settled, and nothing
  more: an entry goes only once no group still has it pending (delivered, not
  acknowledged) or undelivered. Computed and applied in one step, so an entry delivered
  meanwhile cannot be cut: new entries and new deliveries only have larger ids.
  A stream no group reads is never trimmed (nothing says what was settled).

  KEYS[1]  orders stream
  ARGV[1]  unused ('' ): the reply only
  Returns  the entries trimmed
]]
local function parse(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function less(a, b)
  local am, as = parse(a)
  local bm, bs = parse(b)
  return am < bm or (am == bm and as < bs)
end
local keep = nil
for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local g = {}
  for i = 1, #group, 2 do
    g[group[i]] = group[i + 1]
  end
  local bound
  if tonumber(g['pending']) > 0 then
    -- The oldest entry delivered to the group and not acknowledged.
    bound = redis.call('XPENDING', KEYS[1], g['name'])[2]
  else
    -- Everything up to the last delivered entry is acknowledged: keep what follows it.
    local ms, seq = parse(g['last-delivered-id'])
    bound = ms .. '-' .. (seq + 1)
  end
  if keep == nil or less(bound, keep) then
    keep = bound
  end
end
if keep == nil then
  return 0
end
return redis.call('XTRIM', KEYS[1], 'MINID', keep)
