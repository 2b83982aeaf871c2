-- functions/reads.lua: reads: peek, peek_state, stats_job, stats_tube, stats, list_tubes.
-- One part of stalkd's Redis Functions library: CMakeLists.txt (STALKD_LUA_PARTS)
-- concatenates src/redis/functions/*.lua in this order into the one library Redis loads:
-- common, states, claim, put, reserve, change, reads, tubes, frontends, extensions, node,
-- register.

-- peek: id -> 'FOUND' id body | 'NOT_FOUND'
local function f_peek(B, now, a)
  local j = load(B, num(a[1]))
  if not j then return done(B, now, 'NOT_FOUND') end
  return done(B, now, 'FOUND', str(j.id), body(B, j))
end

-- peek_state: tube which(ready|delayed|buried) -> 'FOUND' id body | 'NOT_FOUND'
local function f_peek_state(B, now, a)
  local prefix = ({ready = 'r:', delayed = 'd:', buried = 'b:'})[a[2]]
  local h = redis.call('ZRANGE', B .. prefix .. a[1], 0, 0)
  if not h[1] then return done(B, now, 'NOT_FOUND') end
  local j = load(B, idof(h[1]))
  return done(B, now, 'FOUND', str(j.id), body(B, j))
end

-- stats_job: id -> 'OK' tube state pri age_ms delay ttr time_left_ms reserves timeouts
-- releases buries kicks limited tries_left reason ttl_left_ms ext key attrs detached
local function f_stats_job(B, now, a)
  local j = load(B, num(a[1]))
  if not j then return done(B, now, 'NOT_FOUND') end
  local left = 0
  if j.state == DELAYED or j.state == RESERVED then left = j.deadline - now end
  local ttr = j.ttr  -- the job's own, also while a reserve-ext ttr= reservation runs
  local key, attrs = '', ''
  if j.flags >= FLAG_EXT then
    local e = redis.call('HMGET', B .. 'e:' .. str(j.id), 'key', 'attrs')
    key, attrs = e[1] or '', e[2] or ''
  end
  local ttl_left = -1
  if j.ttl > 0 then ttl_left = j.ttl - now end
  return done(B, now, 'OK', j.tube, STATE_NAME[j.state], str(j.pri), str(now - j.created),
              str(j.delay), str(ttr), str(left), str(j.reserves), str(j.timeouts),
              str(j.releases), str(j.buries), str(j.kicks), str(j.limited), str(j.tries),
              j.state == BURIED and (REASON_NAME[j.reason] or '') or '', str(ttl_left),
              str(j.flags >= FLAG_EXT and 1 or 0), key, attrs,
              str((j.state == RESERVED and j.flags % 2 == FLAG_DETACHED) and 1 or 0))
end

-- stats_tube: tube -> 'OK' ready urgent reserved delayed buried total using watching deletes
-- pauses pause_s pause_left_ms expired exhausted default_tries | 'NOT_FOUND'
local function f_stats_tube(B, now, a)
  local tube = a[1]
  if not exists(B, tube) then
    return done(B, now, 'NOT_FOUND')
  end
  local t = B .. 't:' .. tube
  local h = redis.call('HGETALL', t)
  local v = {}
  local using, watching = 0, 0
  for i = 1, #h, 2 do
    local k = h[i]
    local p = string.sub(k, 1, 2)
    if p == 'u:' then
      using = using + num(h[i + 1])
    elseif p == 'w:' then
      watching = watching + num(h[i + 1])
    else
      v[k] = h[i + 1]
    end
  end
  local pu = num(v.pu)
  local pause_s, pause_left = 0, 0
  if pu > now then pause_s, pause_left = num(v.pd), pu - now end
  local r = B .. 'r:' .. tube
  return done(B, now, 'OK', str(redis.call('ZCARD', r)),
              str(redis.call('ZCOUNT', r, '-inf', URGENT - 1)), str(num(v.reserved)),
              str(redis.call('ZCARD', B .. 'd:' .. tube)),
              str(redis.call('ZCARD', B .. 'b:' .. tube)), str(num(v.total)), str(using),
              str(watching), str(num(v.deletes)), str(num(v.pauses)), str(pause_s),
              str(pause_left), str(num(v.expired)), str(num(v.exhausted)),
              str(num(redis.call('HGET', B .. 'tt', tube))))
end

-- stats: -> 'OK' ready urgent reserved delayed buried total timeouts expired exhausted tubes
-- then, per live front end other than the caller (fid), its counters as name value pairs
-- separated by a '--' marker.
local function f_stats(B, now, a)
  local m = redis.call('HMGET', B .. 'm', 'ready', 'urgent', 'reserved', 'delayed', 'buried',
                       'total', 'timeouts', 'expired', 'exhausted')
  local tubes = redis.call('ZCARD', B .. 'tubes')
  if parts == 1 then
    tubes = math.max(tubes, 1)
  elseif redis.call('ZSCORE', B .. 'tubes', 'default') then
    tubes = tubes - 1  -- a cluster's front end counts "default" once, itself
  end
  local out = {'OK'}
  for i = 1, 9 do out[#out + 1] = str(num(m[i])) end
  out[#out + 1] = str(tubes)
  local fids = redis.call('ZRANGE', B .. 'fe', now, '+inf', 'BYSCORE')
  for _, fid in ipairs(fids) do
    if fid ~= a[1] then
      out[#out + 1] = '--'
      for _, v in ipairs(redis.call('HGETALL', B .. 'fst:' .. fid)) do out[#out + 1] = v end
    end
  end
  return done_list(B, now, table.remove(out, 1), out)
end

-- list_tubes: -> 'OK' tube...
local function f_list_tubes(B, now, a)
  local t = redis.call('ZRANGE', B .. 'tubes', 0, -1)
  if #t == 0 then t = {'default'} end
  return done_list(B, now, 'OK', t)
end
