-- functions/node.lua: per-node reads on a cluster (FCALL_RO with no key): scan_node, sum_node,
-- tubes_node.
-- One part of stalkd's Redis Functions library: CMakeLists.txt (STALKD_LUA_PARTS)
-- concatenates src/redis/functions/*.lua in this order into the one library Redis loads:
-- common, states, claim, put, reserve, change, reads, tubes, frontends, extensions, node,
-- register.

---------------------------------------------------------------------------------------------
-- Per node, on a cluster: FCALL_RO with no key, reading the partitions this node serves, named
-- by their tags. A partition not wholly here (its slot migrating, or moved since the caller
-- learned the slot map) fails its redis.pcall: it is reported, and the caller asks it alone,
-- routed (and retried through the migration).

local function failed(r) return type(r) == 'table' and r.err ~= nil end

-- scan_node: ndead fid... tag... -> the indexes (from 1) of the tags whose partition has
-- timer work due, then '--', then those of the partitions that hold sessions or tube
-- references of a dead front end (fid...); a partition not here is in both lists. Each gets
-- a pump (with the dead fids: it reaps them).
local function f_scan_node(_, a)
  local now = now_ms()
  local nd = num(a[1])
  local due, dead = {}, {}
  for i = nd + 2, #a do
    local B = a[i] .. ':'
    local at = str(i - nd - 1)
    local h = redis.pcall('ZRANGE', B .. 'x', '0', '0', 'WITHSCORES')
    local gone = failed(h)
    if gone or (h[1] ~= nil and tonumber(h[2]) <= now) then due[#due + 1] = at end
    for k = 2, nd + 1 do
      local e = gone and 1 or redis.pcall('EXISTS', B .. 'fs:' .. a[k], B .. 'ft:' .. a[k])
      if failed(e) or e > 0 then
        dead[#dead + 1] = at
        break
      end
    end
  end
  due[#due + 1] = '--'
  for _, i in ipairs(dead) do due[#due + 1] = i end
  return due
end

local STATS_FIELDS = {'ready', 'urgent', 'reserved', 'delayed', 'buried', 'total', 'timeouts',
                      'expired', 'exhausted'}

-- sum_node: tag... -> the partitions' job counters summed (as stats: ready urgent reserved
-- delayed buried total timeouts expired exhausted), their tubes but "default", then the
-- indexes of the tags not here.
local function f_sum_node(_, a)
  local sum = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
  local skipped = {}
  for i, tag in ipairs(a) do
    local B = tag .. ':'
    local m = redis.pcall('HMGET', B .. 'm', unpack(STATS_FIELDS))
    local t = redis.pcall('ZCARD', B .. 'tubes')
    local d = redis.pcall('ZSCORE', B .. 'tubes', 'default')
    if failed(m) or failed(t) or failed(d) then
      skipped[#skipped + 1] = str(i)
    else
      for k = 1, 9 do sum[k] = sum[k] + num(m[k]) end
      sum[10] = sum[10] + t - (d and 1 or 0)
    end
  end
  local out = {}
  for k = 1, 10 do out[k] = str(sum[k]) end
  for _, i in ipairs(skipped) do out[#out + 1] = i end
  return out
end

-- tubes_node: tag... -> per tag, in order, the number of its tubes but "default" (-1: not
-- here) and their names in the order they were made.
local function f_tubes_node(_, a)
  local out = {}
  for _, tag in ipairs(a) do
    local t = redis.pcall('ZRANGE', tag .. ':tubes', '0', '-1')
    if failed(t) then
      out[#out + 1] = '-1'
    else
      local at = #out + 1
      out[at] = '0'
      for _, name in ipairs(t) do
        if name ~= 'default' then out[#out + 1] = name end
      end
      out[at] = str(#out - at)
    end
  end
  return out
end
