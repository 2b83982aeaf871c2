-- functions/reserve.lua: the reserve functions: reserve, head (a reserve across partitions), wait,
-- reserve_job.
-- One part of stalkd's Redis Functions library: CMakeLists.txt (STALKD_LUA_PARTS)
-- concatenates src/redis/functions/*.lua in this order into the one library Redis loads:
-- common, states, claim, put, reserve, change, reads, tubes, frontends, extensions, node,
-- register.

-- reserve: sid count ttr freeze detached lease_ms enlisted bound tube... -> 'RESERVED' (id
-- body deadline created)... | 'NONE' [pri created id]. lease_ms > 0: nothing ready, so the
-- caller will wait: waiters' lease on the tubes until now + lease_ms (puts then publish on
-- the wake channel). bound ('pri created id' of another partition's best job, or ''): only
-- jobs before it are reserved; when the best here is not, 'NONE' names it.
local function f_reserve(B, now, a)
  local sid, n, ttr = num(a[1]), num(a[2]), num(a[3])
  local freeze, detached, lease = a[4] == '1', a[5] == '1', num(a[6])
  enlisted = a[7] == '1'
  local bp, bc, bi = string.match(a[8], '^(%d+) (%d+) (%d+)$')
  local out = {'RESERVED'}
  for _ = 1, n do
    local id, pri = best(B, a, 9, now)
    if not id then break end
    if bp then
      local c = math.floor(load(B, id).created)  -- the bound's is in whole ms
      if before(num(bp), num(bc), num(bi), pri, c, id) then
        if #out == 1 then return done(B, now, 'NONE', str(pri), str(c), str(id)) end
        break
      end
    end
    local j = reserve_one(B, id, sid, ttr, freeze, detached, now)
    for _, v in ipairs(job_reply(B, j, now)) do out[#out + 1] = v end
  end
  if #out == 1 then
    if lease > 0 then lease_waiters(B, a, 9, now + lease) end
    return done(B, now, 'NONE')
  end
  return done_list(B, now, table.remove(out, 1), out)
end

-- head: lease_ms tube... -> 'HEAD' pri created id | 'NONE': the best ready job over the
-- tubes (a reserve across partitions asks each first); lease_ms > 0: the caller may wait,
-- the tubes are leased to waiters.
local function f_head(B, now, a)
  if num(a[1]) > 0 then lease_waiters(B, a, 2, now + num(a[1])) end
  local id, pri = best(B, a, 2, now)
  if not id then return done(B, now, 'NONE') end
  return done(B, now, 'HEAD', str(pri), str(math.floor(load(B, id).created)), str(id))
end

-- wait: lease_ms tube...: refreshes the waiters' lease of the tubes.
local function f_wait(B, now, a)
  lease_waiters(B, a, 2, now + num(a[1]))
  return done(B, now)
end

-- reserve_job: sid id enlisted -> 'RESERVED' id body deadline created | 'NOT_FOUND'
local function f_reserve_job(B, now, a)
  enlisted = a[3] == '1'
  local j = load(B, num(a[2]))
  if not j or j.state == RESERVED then return done(B, now, 'NOT_FOUND') end
  j = reserve_one(B, j.id, num(a[1]), 0, false, false, now)
  return done(B, now, 'RESERVED', unpack(job_reply(B, j, now)))
end
