-- functions/change.lua: what a job's holder (or anyone) does to it: delete, release, bury, touch,
-- kick, kick_job, respawn.
-- One part of stalkd's Redis Functions library: CMakeLists.txt (STALKD_LUA_PARTS)
-- concatenates src/redis/functions/*.lua in this order into the one library Redis loads:
-- common, states, claim, put, reserve, change, reads, tubes, frontends, extensions, node,
-- register.

-- delete: sid id... -> 'DELETED' n (jobs deleted; one id: 0 means NOT_FOUND)
local function f_delete(B, now, a)
  local sid = num(a[1])
  local n = 0
  for i = 2, #a do
    local j = load(B, num(a[i]))
    if j and (j.state ~= RESERVED or reserved_by(j, sid)) then
      redis.call('HINCRBY', B .. 't:' .. j.tube, 'deletes', '1')
      destroy(B, j)
      n = n + 1
    end
  end
  return done(B, now, 'DELETED', n)
end

-- release: sid id pri delay -> 'RELEASED' | 'BURIED' | 'NOT_FOUND'
local function f_release(B, now, a)
  local j = load(B, num(a[2]))
  if not j or not reserved_by(j, num(a[1])) then return done(B, now, 'NOT_FOUND') end
  j.releases = j.releases + 1
  j.delay = num(a[4])  -- stats-job shows the release's delay, 0 included
  end_reservation(B, j, num(a[3]), j.delay, 3, now)
  return done(B, now, 'RELEASED')
end

-- bury: sid id pri -> 'BURIED' | 'NOT_FOUND'
local function f_bury(B, now, a)
  local j = load(B, num(a[2]))
  if not j or not reserved_by(j, num(a[1])) then return done(B, now, 'NOT_FOUND') end
  leave(B, j)
  if expired(j, now) then
    count(B, j.tube, 'expired', 1)
    drop(B, j)
    return done(B, now, 'BURIED')
  end
  j.pri = num(a[3])
  j.buries = j.buries + 1
  j.reason = 1
  enter(B, j, BURIED, now)
  save(B, j)
  return done(B, now, 'BURIED')
end

-- touch: sid id -> 'TOUCHED' deadline | 'NOT_FOUND'
local function f_touch(B, now, a)
  local j = load(B, num(a[2]))
  if not j or not reserved_by(j, num(a[1])) then return done(B, now, 'NOT_FOUND') end
  local t = j.res_ttr > 0 and j.res_ttr or j.ttr
  j.deadline = now + t * 1000
  xset(B, 'ZADD', score(j.deadline), 'r' .. mid(j.id))
  save(B, j)
  return done(B, now, 'TOUCHED', str(j.deadline))
end

local function kick_job(B, j, now)
  leave(B, j)
  j.kicks = j.kicks + 1
  if j.limited == 1 and j.tries == 0 then j.tries = 1 end
  j.reason = 0
  enter(B, j, READY, now)
  save(B, j)
end

-- kick: tube n [which bound] -> 'KICKED' n which bound: buried jobs first or, if the tube has
-- none, delayed ones (which: 'b:' or 'd:'). At most 1000 a call: the front end calls again
-- with the first call's `which` and `bound` (the set's last score then), so a job that was
-- kicked, reserved and buried again meanwhile is not kicked twice by one kick.
local function f_kick(B, now, a)
  local tube, n, set, bound = a[1], math.min(num(a[2]), 1000), a[3], a[4]
  if not set or set == '' then
    set = redis.call('EXISTS', B .. 'b:' .. tube) == 1 and 'b:' or 'd:'
    local last = redis.call('ZRANGE', B .. set .. tube, -1, -1, 'WITHSCORES')
    bound = last[2] or '-inf'
  end
  if n <= 0 then return done(B, now, 'KICKED', 0, set, bound) end
  local ms = redis.call('ZRANGE', B .. set .. tube, '-inf', bound, 'BYSCORE', 'LIMIT', 0, n)
  for _, m in ipairs(ms) do kick_job(B, load(B, idof(m)), now) end
  return done(B, now, 'KICKED', #ms, set, bound)
end

-- kick_job: id -> 'KICKED' | 'NOT_FOUND'
local function f_kick_job(B, now, a)
  local j = load(B, num(a[1]))
  if not j or (j.state ~= BURIED and j.state ~= DELAYED) then
    return done(B, now, 'NOT_FOUND')
  end
  kick_job(B, j, now)
  return done(B, now, 'KICKED')
end

-- respawn: tube n ttl_s -> 'KICKED' n: buried jobs back with one try and a new TTL.
local function f_respawn(B, now, a)
  local tube, n, ttl_s = a[1], math.min(num(a[2]), 1000), num(a[3])
  if n <= 0 then return done(B, now, 'KICKED', 0) end
  local ms = redis.call('ZRANGE', B .. 'b:' .. tube, 0, n - 1)
  for _, m in ipairs(ms) do
    local j = load(B, idof(m))
    leave(B, j)
    j.kicks = j.kicks + 1
    j.limited, j.tries, j.reason = 1, 1, 0
    if j.ttl > 0 then xrem(B, 'l' .. mid(j.id), j.ttl) end
    j.ttl = 0
    if ttl_s > 0 then
      j.ttl = now + ttl_s * 1000
      xadd(B, score(j.ttl), 'l' .. mid(j.id))
    end
    enter(B, j, READY, now)
    save(B, j)
  end
  return done(B, now, 'KICKED', #ms)
end
