-- functions/extensions.lua: extension commands over many jobs or a tube's settings: purge,
-- list_jobs, tube_tries; and skip_id (an abandoned put's id).
-- One part of stalkd's Redis Functions library: CMakeLists.txt (STALKD_LUA_PARTS)
-- concatenates src/redis/functions/*.lua in this order into the one library Redis loads:
-- common, states, claim, put, reserve, change, reads, tubes, frontends, extensions, node,
-- register.

-- purge: tube which limit -> 'PURGED' n more (more: 1 if jobs are left to purge)
local function f_purge(B, now, a)
  local tube, which, limit = a[1], a[2], num(a[3])
  if not exists(B, tube) then
    return done(B, now, 'NOT_FOUND')
  end
  local sets = {ready = {'r:'}, delayed = {'d:'}, buried = {'b:'}, all = {'r:', 'd:', 'b:'}}
  local n = 0
  for _, p in ipairs(sets[which]) do
    local ms = redis.call('ZRANGE', B .. p .. tube, '0', str(limit - n - 1))
    for _, m in ipairs(ms) do
      destroy(B, load(B, idof(m)))
      n = n + 1
    end
  end
  local more = 0
  if n >= limit then
    for _, p in ipairs(sets[which]) do
      if redis.call('EXISTS', B .. p .. tube) == 1 then more = 1 end
    end
  end
  return done(B, now, 'PURGED', n, more)
end

-- list_jobs: tube state from count -> 'OK' next id...: ids in `state`, in id order, from
-- `from`. A state's set of up to 65536 jobs is read whole; beyond that (and for reserved
-- jobs, which have no per-tube set) at most 65536 consecutive ids of the partition (every
-- P-th id) are looked at per call.
local function f_list_jobs(B, now, a)
  local tube, state, from, n = a[1], a[2], math.max(num(a[3]), 1), num(a[4])
  if not exists(B, tube) then
    return done(B, now, 'NOT_FOUND')
  end
  local top = num(redis.call('HGET', B .. 'm', 'seq')) * parts + part  -- the last id given
  local want = ({ready = READY, delayed = DELAYED, reserved = RESERVED, buried = BURIED})[state]
  local set = ({ready = 'r:', delayed = 'd:', buried = 'b:'})[state]
  local out = {}
  local nxt = 0
  local last = from + 65535 * parts
  if set and redis.call('ZCARD', B .. set .. tube) <= 65536 then
    local ids = {}
    for _, m in ipairs(redis.call('ZRANGE', B .. set .. tube, 0, -1)) do
      local id = idof(m)
      if id >= from and id <= last then ids[#ids + 1] = id end
    end
    table.sort(ids)
    for i = 1, math.min(n, #ids) do out[i] = str(ids[i]) end
    if #ids >= n and n > 0 then
      nxt = ids[n] + 1
    elseif last < top then
      nxt = last + 1
    end
  else
    local id = math.max(math.ceil((from - part) / parts), 1) * parts + part
    local upto = math.min(top, last)
    while id <= upto and #out < n do
      local j = load(B, id)
      if j and j.tube == tube and j.state == want then out[#out + 1] = str(id) end
      id = id + parts
    end
    if #out >= n then
      nxt = num(out[#out]) + 1  -- after a full page: the id after its last
    elseif id <= top then
      nxt = id
    end
  end
  table.insert(out, 1, str(nxt))
  return done_list(B, now, 'OK', out)
end

-- skip_id: floor: a put that took an id when its line arrived was abandoned (EXPECTED_CRLF,
-- its client gone mid-body): the next job's id skips it, as in beanstalkd.
local function f_skip_id(B, now, a)
  next_seq(B, num(a[1]))
  return done(B, now, 'OK')
end

-- tube_tries: tube n
local function f_tube_tries(B, now, a)
  if num(a[2]) > 0 then
    redis.call('HSET', B .. 'tt', a[1], a[2])
  else
    redis.call('HDEL', B .. 'tt', a[1])
  end
  return done(B, now, 'TUBE-TRIES', a[2])
end
