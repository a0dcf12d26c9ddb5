--[[
  The shard's work marks, which the settler and the expiry sweeper read in place of
  every product listed (src/redis/shard-marks.ts): one pair per Redis, or per cluster
  master, named `<prefix>{w:<tag>}:settle` and `<prefix>{w:<tag>}:due`.
    settle  sorted set: product id -> entries written to its order log, counted here in
            the step that appends them; the settler removes a product only while the
            count is the one it read before it found the log settled, so an entry
            written meanwhile keeps it marked
    due     sorted set: every reservation's order id -> its payment deadline (ms, Redis's clock)
  The tag is the first of MARK_TAGS whose slot this node serves (tag i lies in slot
  (i - 1) * 256, so every master of a cluster serving 256 slots in a row has one; one
  that serves none gets a tag of its own lowest slot, from the app): a script of a
  product's slot reaches it on the same node by its flag allow-cross-slot-keys, and
  Redis refuses a key of another node before anything of it runs. The guess (ARGV) is
  the app's, from its slot map, tried first; a stale map costs a few refused probes,
  never a mark on a node the loops do not read.
]]
local MARK_TAGS = {
  '7yb', '5z4', '6kc', '4h5', 'b3z', 'h94', 'ces', '4lu', '31g', '121', '2gn', 'kj', 'n6o', '16q', 'vkn', 'mc0',
  'bb0', '5k6', '6za', '4y7', 'bfp', '5ov', 'c0y', 'pu7', '3dm', 'dmk', '22d', 'zh', 'nce', '9jc', 'o5l', '8xb',
  'hxl', '7xr', 'acu', '6js', '1hdb', 'b2j', '4me', '6n3', 'd9q', '30w', 'jz', 'oe6', '17a', '347', '8hp', 'ghn',
  'hin', '7ip', 'arw', 'kx9', '5nf', '7m0', '48o', 'c1i', '9o3', 'nf5', 'm3j', '23t', '1bk', 'fkm', '8yr', '274',
}

-- The marks of the shard that holds `productKey` (any key of the product), or an error
-- before anything is written when none is served here. `guess`: an index into MARK_TAGS,
-- or `=<tag>` (a master that serves none of their slots: a tag of a slot it serves, from
-- the app's slot map), or '' for none; tried first. `!`: one Redis, the first tag, unprobed. Both keys are probed: while a slot
-- moves, one of them may have left the node already, and a write to it would fail
-- half-way through the script. Call it before the script's first write.
local function shardMarks(guess, productKey)
  local prefix, product = string.match(productKey, '^(.*){p:([^}]*)}:[a-z]+$')
  local function at(tag)
    local base = prefix .. '{w:' .. tag .. '}:'
    for _, part in ipairs({'settle', 'due'}) do
      local probe = redis.pcall('EXISTS', base .. part)
      if type(probe) == 'table' and probe.err then
        return nil
      end
    end
    return {settle = base .. 'settle', due = base .. 'due', product = product}
  end
  -- One Redis (the app's word): every slot is here, nothing to probe.
  if guess == '!' then
    local base = prefix .. '{w:' .. MARK_TAGS[1] .. '}:'
    return {settle = base .. 'settle', due = base .. 'due', product = product}
  end
  local first = tonumber(guess)
  local marks
  if string.sub(guess, 1, 1) == '=' then
    marks = at(string.sub(guess, 2))
  elseif first and MARK_TAGS[first] then
    marks = at(MARK_TAGS[first])
  end
  for i = 1, #MARK_TAGS do
    if marks then
      return marks
    end
    if i ~= first then
      marks = at(MARK_TAGS[i])
    end
  end
  if marks then
    return marks
  end
  return error({err = 'MARKS_NOT_LOCAL this node serves the slot of no mark tag (src/redis/shard-marks.ts)'})
end

-- An entry appended to the product's order log: the settler's mark, in the same step.
local function markWritten(marks)
  redis.call('ZINCRBY', marks.settle, 1, marks.product)
end
