-- functions/frontends.lua: front ends and their connections: release_conn, reaping a dead front
-- end, pump, lease, quit.
-- One part of stalkd's Redis Functions library: CMakeLists.txt (STALKD_LUA_PARTS)
-- concatenates src/redis/functions/*.lua in this order into the one library Redis loads:
-- common, states, claim, put, reserve, change, reads, tubes, frontends, extensions, node,
-- register.

-- Gives back up to `limit` of a session's reservations; true when none are left.
local function release_session(B, sid, now, limit)
  local s = B .. 's:' .. str(sid)
  local ms = redis.call('ZRANGE', s, '0', str(limit - 1))  -- the first reserved first, as the engine
  for _, m in ipairs(ms) do
    local j = load(B, idof(m))
    if j and j.state == RESERVED and j.owner == sid then
      end_reservation(B, j, j.pri, 0, 3, now)
    else
      redis.call('ZREM', s, m)
    end
  end
  if redis.call('EXISTS', s) == 1 then return false end
  redis.call('SREM', B .. 'fs:' .. str(math.floor(sid / SID_FID)), str(sid))
  return true
end

-- release_conn: sid: a connection closed; its reserved jobs come back, 1000 a call
-- ('MORE': call again).
local function f_release_conn(B, now, a)
  return done(B, now, release_session(B, num(a[1]), now, 1000) and 'RELEASED' or 'MORE')
end

-- Gives back everything of a front end whose lease ran out: its connections' reservations
-- and their tube references.
local function reap(B, fid, now)
  local budget = 1000  -- reservations given back per call: a big front end takes several
  for _, sid in ipairs(redis.call('SMEMBERS', B .. 'fs:' .. fid)) do
    if budget <= 0 then return false end
    local n = redis.call('ZCARD', B .. 's:' .. sid)
    if n > budget then
      release_session(B, num(sid), now, budget)
      return false
    end
    release_session(B, num(sid), now, math.max(n, 1))
    budget = budget - n
  end
  redis.call('DEL', B .. 'fs:' .. fid)
  for _, tube in ipairs(redis.call('SMEMBERS', B .. 'ft:' .. fid)) do
    local t = B .. 't:' .. tube
    local v = redis.call('HMGET', t, 'u:' .. fid, 'w:' .. fid)
    local n = num(v[1]) + num(v[2])
    redis.call('HDEL', t, 'u:' .. fid, 'w:' .. fid)
    if n > 0 and redis.call('HINCRBY', t, 'refs', str(-n)) <= 0 then redis.call('HDEL', t, 'refs') end
    maybe_free_tube(B, tube)
  end
  redis.call('DEL', B .. 'ft:' .. fid, B .. 'fst:' .. fid)
  redis.call('ZREM', B .. 'fe', fid)
  return true
end

-- pump: limit floor [fid...] -> timer work; also reaps front ends whose lease ran out: those
-- of this partition's B..'fe' (on one Redis: all; on a cluster only {g} has leases, and its
-- pump, called when no partition holds anything of them any more, forgets them), and the
-- fids named (on a cluster: found dead in {g}, reaped partition by partition). The job
-- numbering goes on above floor if it is below (next_seq).
local function f_pump(B, now, a)
  local n = apply_due(B, now, num(a[1]))
  if not global and num(redis.call('HGET', B .. 'm', 'seq')) < num(a[2]) then
    redis.call('HSET', B .. 'm', 'seq', a[2])
  end
  local dead = {}
  -- On a cluster's {g}, only the fids named: the caller found no partition holding anything
  -- of them. Another front end whose lease ran out meanwhile may still hold reservations and
  -- tube references in partitions; dropping its lease here would leave them there for good
  -- (no front end would list it as dead again). And not one that renewed its lease since.
  if not global then
    dead = redis.call('ZRANGE', B .. 'fe', '-inf', str(now), 'BYSCORE', 'LIMIT', '0', '4')
  end
  for i = 3, #a do
    if not global or num(redis.call('ZSCORE', B .. 'fe', a[i])) <= now then
      dead[#dead + 1] = a[i]
    end
  end
  for _, fid in ipairs(dead) do
    if not reap(B, fid, now) then
      n = num(a[1])  -- more to do: the caller pumps again at once
      break
    end
  end
  return done(B, now, 'PUMPED', n)
end

-- lease: fid lease_ms [name value]...: renews a front end's lease (a new fid: 0 takes one)
-- and publishes its counters for `stats`. -> 'FID' fid reaped dead... (reaped 1: the lease
-- had run out and the front end been reaped; dead: up to 16 fids whose lease ran out, which a
-- cluster's front ends reap partition by partition)
local function f_lease(B, now, a)
  local fid = a[1]
  local renew = fid ~= '0'
  if not renew then
    fid = str(redis.call('HINCRBY', B .. 'm', 'fid', '1'))
  elseif num(redis.call('HGET', B .. 'm', 'fid')) < num(fid) then
    -- The store was wiped (FLUSHALL, a Redis restarted empty): its counter starts again
    -- from 0. It goes up to this live front end's id, so none taken from now on is the same.
    redis.call('HSET', B .. 'm', 'fid', fid)
  end
  -- A renewal that adds the front end anew: it had been reaped (its sessions' reservations
  -- given back, their fs: listing gone).
  -- On a cluster's {g}, also one whose lease had run out: the other front ends reap its
  -- partitions from then on, before its lease leaves {g}.
  local old = global and renew and redis.call('ZSCORE', B .. 'fe', fid)
  local reaped = redis.call('ZADD', B .. 'fe', str(now + num(a[2])), fid) == 1 and renew
  if old and num(old) <= now then reaped = true end
  if #a > 2 then
    local kv = {}
    for i = 3, #a do kv[#kv + 1] = a[i] end
    for i = 1, #kv, 2 do redis.call('HSET', B .. 'fst:' .. fid, kv[i], kv[i + 1]) end
  end
  local out = {fid, reaped and '1' or '0'}
  for _, d in ipairs(redis.call('ZRANGE', B .. 'fe', '-inf', str(now), 'BYSCORE', 'LIMIT', '0',
                                '16')) do
    out[#out + 1] = d
  end
  return done_list(B, now, 'FID', out)
end

-- quit: fid: a front end stops cleanly; its sessions are released as by reap.
local function f_quit(B, now, a)
  return done(B, now, reap(B, a[1], now) and 'OK' or 'MORE')
end
