-- functions/put.lua: the replies every function makes (done, done_list), the library's version,
-- and put (with the partition's job numbering).
-- One part of stalkd's Redis Functions library: CMakeLists.txt (STALKD_LUA_PARTS)
-- concatenates src/redis/functions/*.lua in this order into the one library Redis loads:
-- common, states, claim, put, reserve, change, reads, tubes, frontends, extensions, node,
-- register.

---------------------------------------------------------------------------------------------
-- The functions. Every reply starts with the master's clock (ms) and the partition's next
-- timer (ms, -1 none), so front ends know when to pump: {now, next_due, status, ...}.

local function done(B, now, ...)
  return {str(now), str(next_due(B)), ...}
end

-- The same with a list of words after the status: no unpack(), whose limit (a few thousand
-- values) a list of tubes or jobs can pass.
local function done_list(B, now, status, words)
  local out = {str(now), str(next_due(B)), status}
  for _, w in ipairs(words) do out[#out + 1] = w end
  return out
end

-- version
local function f_version() return VERSION end

-- The partition's next job sequence number (a job's id is seq * parts + part), above `floor`:
-- the highest the calling front end has seen here. A store that was wiped (FLUSHALL, a
-- restart without its data) so goes on above the ids its front ends handed out, and an id a
-- client still holds from before never names a new job.
local function next_seq(B, floor)
  local seq = redis.call('HINCRBY', B .. 'm', 'seq', '1')
  if seq <= floor then
    seq = floor + 1
    redis.call('HSET', B .. 'm', 'seq', str(seq))
  end
  return seq
end

-- put: sid pri delay ttr tube body limited tries ttl_s key attrs floor; attrs: the front
-- end's encoding of the attributes, kept as it is; floor: see next_seq
-- -> 'INSERTED' id | 'EXISTS' id
local function f_put(B, now, a)
  local tube = a[5]
  local key = a[10]
  local floor = num(a[12])
  if key and key ~= '' then
    local old = redis.call('HGET', B .. 'k:' .. tube, key)
    if old then
      next_seq(B, floor)  -- the put took an id, as in the engine
      return done(B, now, 'EXISTS', old)
    end
  end
  local id = next_seq(B, floor) * parts + part
  local j = {id = id, tube = tube, state = READY, pri = num(a[2]), delay = num(a[3]), ttr = num(a[4]),
             reserves = 0, timeouts = 0, releases = 0, buries = 0, kicks = 0, created = now,
             deadline = 0, owner = 0, limited = 0, tries = 0, ttl = 0, reason = 0, flags = 0,
             res_ttr = 0}
  local limited, tries, ttl_s = num(a[7]), num(a[8]), num(a[9])
  if limited == 0 then
    local d = num(redis.call('HGET', B .. 'tt', tube))
    if d > 0 then limited, tries = 1, d end
  end
  j.limited, j.tries = limited, tries
  if ttl_s > 0 then j.ttl = now + ttl_s * 1000 end
  local attrs = a[11] or ''
  if (key and key ~= '') or attrs ~= '' then
    j.flags = FLAG_EXT
    local e = B .. 'e:' .. str(id)
    if key and key ~= '' then
      redis.call('HSET', e, 'key', key)
      redis.call('HSET', B .. 'k:' .. tube, key, str(id))
    end
    if attrs ~= '' then redis.call('HSET', e, 'attrs', attrs) end
  end
  local state = READY
  if j.delay > 0 then
    state = DELAYED
    j.deadline = now + j.delay * 1000
  end
  j.state = state  -- the header written now is final: enter() changes nothing in it
  -- A tube's first job since it was made: it may have been made by this put.
  if redis.call('HINCRBY', B .. 't:' .. tube, 'total', '1') == 1 then touch_tube(B, tube) end
  redis.call('SET', jkey(B, id), header(j) .. tube .. a[6])
  redis.call('HINCRBY', B .. 'm', 'total', '1')
  if j.ttl > 0 then xadd(B, score(j.ttl), 'l' .. mid(id)) end
  enter(B, j, state, now)
  return done(B, now, 'INSERTED', str(id))
end
