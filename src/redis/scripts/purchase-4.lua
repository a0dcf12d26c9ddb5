--[[
  The whole purchase as one script (strategy `atomic`): Redis runs a script with
  nothing else interleaved, so the check and the write cannot be split by another
  buyer and no lock is needed. The same rules, in the same order, as
  src/orders/sale-rules.ts.

  KEYS[1]  meta hash (perUserLimit)   KEYS[2]  stock
  KEYS[3]  buyers hash                KEYS[4]  orders stream
  ARGV[1]  userId   ARGV[2]  quantity (integer >= 1)   ARGV[3]  orderId
  Returns  {'OK', remaining}
           {'UNKNOWN_PRODUCT'}
           {'LIMIT_REACHED', perUserLimit, bought}
           {'SOLD_OUT'}
           {'INSUFFICIENT_STOCK', remaining}
]]
local limit = redis.call('HGET', KEYS[1], 'perUserLimit')
local stock = redis.call('GET', KEYS[2])
if not limit or not stock then
  return {'UNKNOWN_PRODUCT'}
end
local quantity = tonumber(ARGV[2])
local bought = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
if bought + quantity > tonumber(limit) then
  return {'LIMIT_REACHED', tonumber(limit), bought}
end
stock = tonumber(stock)
if stock <= 0 then
  return {'SOLD_OUT'}
end
if stock < quantity then
  return {'INSUFFICIENT_STOCK', stock}
end
local remaining = redis.call('DECRBY', KEYS[2], quantity)
redis.call('HINCRBY', KEYS[3], ARGV[1], quantity)
redis.call('XADD', KEYS[4], '*', 'orderId', ARGV[3], 'userId', ARGV[1], 'quantity', ARGV[2])
return {'OK', remaining}
