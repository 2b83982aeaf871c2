-- functions/claim.lua: choosing and taking a job: who may act on it, the best ready job over
-- tubes, reserving one, its reply, leasing tubes to waiters.
-- One part of stalkd's Redis Functions library: CMakeLists.txt (STALKD_LUA_PARTS)
-- concatenates src/redis/functions/*.lua in this order into the one library Redis loads:
-- common, states, claim, put, reserve, change, reads, tubes, frontends, extensions, node,
-- register.

-- Whether a session may act on j as its reserver (or anyone, when detached).
local function reserved_by(j, sid)
  return j.state == RESERVED and (j.owner == sid or j.flags % 2 == FLAG_DETACHED)
end

local function paused(B, tube, now)
  return num(redis.call('HGET', B .. 't:' .. tube, 'pu')) > now
end

-- The best ready job (min pri, then id) over the given tubes, skipping paused ones.
local function best(B, tubes, first, now)
  local bj, bp, bm = nil, nil, nil
  for i = first, #tubes do
    local tube = tubes[i]
    if not paused(B, tube, now) then
      local h = redis.call('ZRANGE', B .. 'r:' .. tube, '0', '0', 'WITHSCORES')
      if h[1] then
        local p = tonumber(h[2])
        local id = idof(h[1])
        if bp == nil or p < bp or (p == bp and id < bj) then bj, bp, bm = id, p, h[1] end
      end
    end
  end
  return bj, bp
end

-- Whether job (p1, c1, i1) comes before (p2, c2, i2) in a reserve across partitions: by
-- priority, then age (created, ms: ids of two partitions say nothing of which came first),
-- then id.
local function before(p1, c1, i1, p2, c2, i2)
  if p1 ~= p2 then return p1 < p2 end
  if c1 ~= c2 then return c1 < c2 end
  return i1 < i2
end

local function reserve_one(B, id, sid, ttr, freeze, detached, now)
  local j = load(B, id, true)
  leave(B, j)
  j.reserves = j.reserves + 1
  if not freeze and j.limited == 1 and j.tries > 0 then j.tries = j.tries - 1 end
  j.owner = detached and 0 or sid
  if detached then j.flags = j.flags - (j.flags % 2) + FLAG_DETACHED end
  j.res_ttr = ttr
  local t = ttr > 0 and ttr or j.ttr
  j.deadline = now + t * 1000
  j.reason = 0
  enter(B, j, RESERVED, now)
  save(B, j)
  return j
end

local function job_reply(B, j, now)
  return {str(j.id), j.body or body(B, j), str(j.deadline), str(j.created)}
end

local function lease_waiters(B, tubes, first, till)
  for i = first, #tubes do
    local t = B .. 't:' .. tubes[i]
    if num(redis.call('HGET', t, 'wl')) < till then redis.call('HSET', t, 'wl', str(till)) end
  end
end
