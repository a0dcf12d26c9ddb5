--[[
  Whether a product's order log is settled as far as its group knows, and the group's
  consumers that are gone: every consumer idle past the bound with nothing pending is
  deleted (XGROUP DELCONSUMER), in the step that saw it had nothing pending, so no entry
  pending with it is ever dropped (a consumer's entries would go with it). An instance
  that died thus leaves no consumer behind once its entries were claimed and settled; a
  live one that is deleted is made again by its next read.

  KEYS[1]  orders stream
  ARGV[1]  the consumer group   ARGV[2]  the idle bound, in ms
  Returns  the entries pending in the group (0: all delivered ones acknowledged), or -1
           when the log or its group is gone
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
local found = false
for _, group in ipairs(groups) do
  if group[2] == ARGV[1] then
    found = true
  end
end
if not found then
  return -1
end
local pending = redis.call('XPENDING', KEYS[1], ARGV[1])[1]
for _, consumer in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local c = {}
  for i = 1, #consumer, 2 do
    c[consumer[i]] = consumer[i + 1]
  end
  if tonumber(c['pending']) == 0 and tonumber(c['idle']) > tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], c['name'])
  end
end
return pending
