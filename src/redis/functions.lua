#!lua name=stalkd
-- stalkd's Redis Functions (docs/SCALE-OUT.md): every state transition of a job is one call,
-- atomic on the master and replicated as one MULTI/EXEC. Loaded by each front end at start
-- (FUNCTION LOAD REPLACE when `stalkd_version` answers another version).
--
-- Every function declares one key: the partition's bare hash tag, which never exists; all
-- keys it touches are built from it, so they share one hash slot (rule 1 of the design
-- study: on Redis Cluster a migrating partition's call is refused with ASK before it runs).
-- The tag is `<prefix>:{0}` on one Redis (one partition), `<prefix>:{<p>/<P>}` for partition
-- p of P on a cluster, `<prefix>:{g}` for what is global there (front ends' leases). A job's
-- id is seq * P + p, so the id names its partition. Keys under a partition B = KEYS[1]..':':
--   B..'m'          HASH   seq, bseq, rseq, fid, job counters (ready urgent delayed reserved
--                          buried total timeouts expired exhausted)
--   B..'j:'..id     STRING a job: header (HDR), tube name, body
--   B..'e:'..id     HASH   a job's key and attributes (only for jobs that have them)
--   B..'r:'..tube   ZSET   ready: score pri, member MID(id) (equal scores sort by member)
--   B..'d:'..tube   ZSET   delayed: score due ms (to the us), member MID(id)
--   B..'b:'..tube   ZSET   buried: score bury sequence, member MID(id)
--   B..'t:'..tube   HASH   a tube: counters (reserved, total, deletes...; its ready, delayed
--                          and buried counts are its sets'), pause, waiter lease, refs
--   B..'k:'..tube   HASH   unique keys: key -> id
--   B..'tubes'      ZSET   tubes that exist, scored by their place in list-tubes (0: default)
--   B..'x'          ZSET   timers: 'd'..tube (delayed head), 'r'..MID (TTR), 'p'..tube
--                          (pause end), 'l'..MID (TTL), scored by due ms
--   B..'s:'..sid    ZSET   MIDs reserved by a session (connection), scored by reservation
--                          order (m's rseq): they come back in that order, as the engine's
--   B..'fs:'..fid   SET    sessions of a front end that have held reservations (until they
--                          close: release_conn), so a dead front end's can be given back
--   B..'ft:'..fid   SET    tubes a front end references (use/watch)
--   B..'fe'         ZSET   front ends' leases: fid -> expiry ms
--   B..'fst:'..fid  HASH   a front end's own counters for `stats` (cmd-*, connections)
-- and one channel for the whole deployment, <prefix>:w: a tube's name when a job becomes
-- ready in it while waited on (PUBLISH reaches every node's subscribers on a cluster).
local VERSION = 'dev'  -- replaced by the library's hash when embedded (embed_lua.cmake)

local READY, DELAYED, RESERVED, BURIED = 1, 2, 3, 4
local STATE_NAME = {'ready', 'delayed', 'reserved', 'buried'}
local REASON_NAME = {'bury', 'timeout', 'release'}
local URGENT = 1024
local TWO32 = 4294967296
local SID_FID = 16777216  -- sid = fid * 2^24 + connection number
local FLAG_DETACHED, FLAG_EXT = 1, 2
-- ver state pri delay ttr reserves timeouts releases buries kicks created deadline owner
-- limited tries_left ttl_deadline reason flags res_ttr tlen
local HDR = '>BBI4I4I4I4I4I4I4I4dddBI4dBBI4H'
local HLEN = 79  -- struct.size(HDR); the struct library is not there while the library loads
local HEAD_END = '278'  -- HLEN + 199: a header and a tube name (at most 200 bytes) end by it

local function mid(id) return struct.pack('>I4I4', math.floor(id / TWO32), id % TWO32) end
local function idof(m)
  local hi, lo = struct.unpack('>I4I4', m)
  return hi * TWO32 + lo
end
local function num(s) return tonumber(s) or 0 end
-- Numbers go to Redis as text made here: redis.call() would format a Lua number with
-- "%.17g", which costs more than most commands it calls (glibc's float printing).
local function str(n) return string.format('%d', n) end

-- The timer set's head score as this call's apply_due found it (-1: empty), while nothing has
-- changed the set since: next_due then needs no second look. nil: unknown.
local x_head = nil

-- The running call's partition (p of P, from its tag) and wake channel; `global`: the call
-- is in a cluster's global partition {g} (front ends' leases), not in one of jobs.
local part, parts, channel = 0, 1, ''
local global = false

-- Set by reserve and reserve_job: the caller's session is already listed in its front end's
-- B..'fs:'..fid (the front end knows: it was told by an earlier reservation's answer).
local enlisted = false

-- ZADD or ZREM on the partition's timer set.
local function xset(B, cmd, ...)
  x_head = nil
  return redis.call(cmd, B .. 'x', ...)
end

-- A timer that is new, or moves earlier: the head moves only if it comes before it.
local function xadd(B, due, member, flag)
  if flag then
    redis.call('ZADD', B .. 'x', flag, due, member)
  else
    redis.call('ZADD', B .. 'x', due, member)
  end
  if x_head and (x_head == -1 or tonumber(due) < x_head) then x_head = tonumber(due) end
end

-- A timer whose score is known goes: the head stays unless it was at or before it.
local function xrem(B, member, due)
  redis.call('ZREM', B .. 'x', member)
  if x_head and x_head ~= -1 and due <= x_head then x_head = nil end
end

-- The master's clock in ms, to the us (a fraction): deadlines and creation times keep it, so
-- a later call always sees time pass since an earlier one set them (stats show whole seconds
-- rounded down, as beanstalkd's ns clock: a TTR of 10 just started has 9 left), and jobs
-- delayed in the same ms are due in the order they were delayed, as the engine's.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

-- A time (ms, to the us) as a sorted-set score; str() would cut it to the ms.
local function score(ms) return string.format('%.3f', ms) end

local function jkey(B, id) return B .. 'j:' .. str(id) end

-- A job's header and tube; with `whole`, its body too (j.body), read with the rest.
local function load(B, id, whole)
  local k = jkey(B, id)
  -- The header and the tube name (at most 200 bytes) in one read.
  local raw
  if whole then
    raw = redis.call('GET', k)
    if not raw then return nil end
  else
    raw = redis.call('GETRANGE', k, '0', HEAD_END)
  end
  if #raw < HLEN then return nil end
  local j = {id = id}
  j.ver, j.state, j.pri, j.delay, j.ttr, j.reserves, j.timeouts, j.releases, j.buries,
      j.kicks, j.created, j.deadline, j.owner, j.limited, j.tries, j.ttl, j.reason, j.flags,
      j.res_ttr, j.tlen = struct.unpack(HDR, raw)
  j.tube = string.sub(raw, HLEN + 1, HLEN + j.tlen)
  if whole then j.body = string.sub(raw, HLEN + j.tlen + 1) end
  return j
end

local function header(j)
  return struct.pack(HDR, 1, j.state, j.pri, j.delay, j.ttr, j.reserves, j.timeouts, j.releases,
                     j.buries, j.kicks, j.created, j.deadline, j.owner, j.limited, j.tries, j.ttl,
                     j.reason, j.flags, j.res_ttr, #j.tube)
end

local function save(B, j) redis.call('SETRANGE', jkey(B, j.id), '0', header(j)) end

local function body(B, j)
  return redis.call('GETRANGE', jkey(B, j.id), str(HLEN + j.tlen), '-1')
end

-- Counters: `by` is '1' or '-1' (text: see str).
local function count(B, tube, field, by)
  redis.call('HINCRBY', B .. 'm', field, by)
  redis.call('HINCRBY', B .. 't:' .. tube, field, by)
end

-- A state's job count: per tube, the ready, delayed and buried sets hold it (ZCARD), so
-- only the partition's total is counted.
local function count_all(B, field, by) redis.call('HINCRBY', B .. 'm', field, by) end

-- A tube exists while it holds jobs or a front end references it ("default" always).
-- list-tubes shows tubes in beanstalkd's order: appended when made, and a freed tube's place
-- taken by the last one.
local function exists(B, tube)
  return tube == 'default' or redis.call('ZSCORE', B .. 'tubes', tube) ~= false
end

local function touch_tube(B, tube)
  local k = B .. 'tubes'
  if redis.call('ZSCORE', k, tube) then return end
  -- "default" is listed first, and always: on a cluster the front end puts it there.
  if parts == 1 and redis.call('ZCARD', k) == 0 and tube ~= 'default' then
    redis.call('ZADD', k, '0', 'default')
  end
  redis.call('ZADD', k, str(redis.call('ZCARD', k)), tube)
end

local function maybe_free_tube(B, tube)
  if tube == 'default' then return end
  local t = B .. 't:' .. tube
  for _, set in ipairs({'r:', 'd:', 'b:'}) do
    if redis.call('EXISTS', B .. set .. tube) == 1 then return end
  end
  local v = redis.call('HMGET', t, 'reserved', 'refs')
  if num(v[1]) > 0 or num(v[2]) > 0 then return end
  redis.call('DEL', t)
  local k = B .. 'tubes'
  local place = redis.call('ZSCORE', k, tube)
  if place then
    redis.call('ZREM', k, tube)
    local last = redis.call('ZRANGE', k, -1, -1)[1]
    if last and tonumber(redis.call('ZSCORE', k, last)) > tonumber(place) then
      redis.call('ZADD', k, place, last)
    end
  end
  xset(B, 'ZREM', 'p' .. tube)
end

local function wake(B, tube, now)
  local lease = num(redis.call('HGET', B .. 't:' .. tube, 'wl'))
  if lease > now then redis.call('PUBLISH', channel, tube) end
end

local function delayed_head(B, tube)
  local h = redis.call('ZRANGE', B .. 'd:' .. tube, '0', '0', 'WITHSCORES')
  if h[1] then
    xset(B, 'ZADD', h[2], 'd' .. tube)
  else
    xset(B, 'ZREM', 'd' .. tube)
  end
end

-- Puts j into `state`: its set, the counters, timers. (j.deadline is set by the caller for
-- DELAYED and RESERVED.)
local function enter(B, j, state, now)
  j.state = state
  local m = mid(j.id)
  if state == READY then
    redis.call('ZADD', B .. 'r:' .. j.tube, str(j.pri), m)
    count_all(B, 'ready', '1')
    if j.pri < URGENT then count_all(B, 'urgent', '1') end
    wake(B, j.tube, now)
  elseif state == DELAYED then
    local due = score(j.deadline)
    redis.call('ZADD', B .. 'd:' .. j.tube, due, m)
    xadd(B, due, 'd' .. j.tube, 'LT')
    count_all(B, 'delayed', '1')
  elseif state == RESERVED then
    xadd(B, score(j.deadline), 'r' .. m)
    if j.owner > 0 then
      redis.call('ZADD', B .. 's:' .. str(j.owner),
                 str(redis.call('HINCRBY', B .. 'm', 'rseq', '1')), m)
      -- Its session is listed with its front end (for reaping) until the session closes;
      -- the front end says whether it has been already.
      if not enlisted then
        redis.call('SADD', B .. 'fs:' .. str(math.floor(j.owner / SID_FID)), str(j.owner))
      end
    end
    count(B, j.tube, 'reserved', '1')
  else
    local seq = redis.call('HINCRBY', B .. 'm', 'bseq', '1')
    redis.call('ZADD', B .. 'b:' .. j.tube, str(seq), m)
    count_all(B, 'buried', '1')
  end
end

local function leave(B, j)
  local m = mid(j.id)
  if j.state == READY then
    redis.call('ZREM', B .. 'r:' .. j.tube, m)
    count_all(B, 'ready', '-1')
    if j.pri < URGENT then count_all(B, 'urgent', '-1') end
  elseif j.state == DELAYED then
    redis.call('ZREM', B .. 'd:' .. j.tube, m)
    delayed_head(B, j.tube)
    count_all(B, 'delayed', '-1')
  elseif j.state == RESERVED then
    xrem(B, 'r' .. m, j.deadline)
    if j.owner > 0 then redis.call('ZREM', B .. 's:' .. str(j.owner), m) end
    j.owner = 0
    j.flags = j.flags - (j.flags % 2)  -- a reservation ends: no longer detached
    j.res_ttr = 0
    count(B, j.tube, 'reserved', '-1')
  else
    redis.call('ZREM', B .. 'b:' .. j.tube, m)
    count_all(B, 'buried', '-1')
  end
end

-- A job that has left its state goes: its record, TTL timer, key and attributes.
local function drop(B, j)
  redis.call('DEL', jkey(B, j.id))
  if j.ttl > 0 then xrem(B, 'l' .. mid(j.id), j.ttl) end
  if j.flags >= FLAG_EXT then
    local e = B .. 'e:' .. str(j.id)
    local key = redis.call('HGET', e, 'key')
    if key then
      local kk = B .. 'k:' .. j.tube
      if num(redis.call('HGET', kk, key)) == j.id then redis.call('HDEL', kk, key) end
    end
    redis.call('DEL', e)
  end
  maybe_free_tube(B, j.tube)
end

local function destroy(B, j)
  leave(B, j)
  drop(B, j)
end

-- The job's TTL passed while it was reserved: it goes once the reservation ends.
local function expired(j, now) return j.ttl > 0 and j.ttl <= now end

local function expire(B, j)
  count(B, j.tube, 'expired', '1')
  destroy(B, j)
end

-- A reservation ends by release (delay in s) or by timeout; `why` 3 release, 2 timeout.
-- Returns true when the job still lives.
local function end_reservation(B, j, pri, delay, why, now)
  leave(B, j)
  if expired(j, now) then
    count(B, j.tube, 'expired', '1')
    drop(B, j)
    return false
  end
  j.pri = pri
  if j.limited == 1 and j.tries == 0 then
    j.reason = why
    count(B, j.tube, 'exhausted', '1')
    enter(B, j, BURIED, now)
  elseif delay > 0 then
    j.deadline = now + delay * 1000
    enter(B, j, DELAYED, now)
  else
    enter(B, j, READY, now)
  end
  save(B, j)
  return true
end

-- Timer work that is due, at most `limit` transitions: delayed jobs become ready, TTRs end,
-- pauses end, TTLs delete. Every function that reads or changes jobs runs it first, so a
-- late pump never shows a stale state.
local function apply_due(B, now, limit)
  local x = B .. 'x'
  local done = 0
  local h = redis.call('ZRANGE', x, '0', '0', 'WITHSCORES')
  local head = h[1] and tonumber(h[2])
  if not head or head > now then
    x_head = head or -1
    return 0
  end
  local upto = score(now)
  while done < limit do
    local due = redis.call('ZRANGE', x, '-inf', upto, 'BYSCORE', 'LIMIT', '0', '16')
    if #due == 0 then break end
    for _, e in ipairs(due) do
      local kind, rest = string.sub(e, 1, 1), string.sub(e, 2)
      if kind == 'd' then
        local ms = redis.call('ZRANGE', B .. 'd:' .. rest, '-inf', upto, 'BYSCORE', 'LIMIT', '0',
                              str(limit - done))
        for _, m in ipairs(ms) do
          local j = load(B, idof(m))
          leave(B, j)
          enter(B, j, READY, now)
          save(B, j)
          done = done + 1
        end
        delayed_head(B, rest)
      elseif kind == 'r' then
        local j = load(B, idof(rest))
        if j and j.state == RESERVED then
          j.timeouts = j.timeouts + 1
          redis.call('HINCRBY', B .. 'm', 'timeouts', '1')
          end_reservation(B, j, j.pri, 0, 2, now)
        else
          xset(B, 'ZREM', e)
        end
        done = done + 1
      elseif kind == 'p' then
        xset(B, 'ZREM', e)
        local t = B .. 't:' .. rest
        redis.call('HDEL', t, 'pu', 'pd')
        wake(B, rest, now)
        done = done + 1
      elseif kind == 'l' then
        xset(B, 'ZREM', e)
        local j = load(B, idof(rest))
        if j and j.state ~= RESERVED then expire(B, j) end
        done = done + 1
      else
        xset(B, 'ZREM', e)
      end
      if done >= limit then break end
    end
  end
  return done
end

local function next_due(B)
  if x_head then return x_head == -1 and -1 or math.ceil(x_head) end
  local h = redis.call('ZRANGE', B .. 'x', '0', '0', 'WITHSCORES')
  if h[1] then return math.ceil(tonumber(h[2])) end  -- a delayed head's score has us
  return -1
end

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

-- pause: tube delay_s -> 'PAUSED' | 'NOT_FOUND'
local function f_pause(B, now, a)
  local tube, d = a[1], num(a[2])
  if not exists(B, tube) then
    return done(B, now, 'NOT_FOUND')
  end
  local t = B .. 't:' .. tube
  redis.call('HINCRBY', t, 'pauses', '1')
  if d > 0 then
    redis.call('HSET', t, 'pu', score(now + d * 1000), 'pd', str(d))
    xset(B, 'ZADD', score(now + d * 1000), 'p' .. tube)
  else
    redis.call('HDEL', t, 'pu', 'pd')
    xset(B, 'ZREM', 'p' .. tube)
    wake(B, tube, now)
  end
  return done(B, now, 'PAUSED')
end

-- ref: fid tube d_using d_watching: a front end's connections began or stopped using or
-- watching the tube.
local function f_ref(B, now, a)
  local fid, tube, du, dw = a[1], a[2], num(a[3]), num(a[4])
  local t = B .. 't:' .. tube
  if du ~= 0 and redis.call('HINCRBY', t, 'u:' .. fid, str(du)) <= 0 then
    redis.call('HDEL', t, 'u:' .. fid)
  end
  if dw ~= 0 and redis.call('HINCRBY', t, 'w:' .. fid, str(dw)) <= 0 then
    redis.call('HDEL', t, 'w:' .. fid)
  end
  local refs = redis.call('HINCRBY', t, 'refs', str(du + dw))
  if refs <= 0 then redis.call('HDEL', t, 'refs') end
  if refs > 0 then
    touch_tube(B, tube)
    redis.call('SADD', B .. 'ft:' .. fid, tube)
  else
    maybe_free_tube(B, tube)
  end
  return done(B, now)
end

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
  if not renew then fid = str(redis.call('HINCRBY', B .. 'm', 'fid', '1')) end
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

-- Registers stalkd_<name>: fn(B, now, args) runs with the partition's key prefix B and the
-- master's clock; unless `raw`, after the timer work that is due.
local function reg(name, fn, flags, raw)
  local callback = function(keys, a)
    local B = keys[1] .. ':'
    local p, n = string.match(keys[1], '{(%d+)/(%d+)}$')
    part, parts = tonumber(p) or 0, tonumber(n) or 1
    global = string.sub(keys[1], -3) == '{g}'
    channel = string.match(keys[1], '^(.*){') .. 'w'
    local now = now_ms()
    x_head = nil
    enlisted = false
    if not raw then apply_due(B, now, 32) end
    return fn(B, now, a)
  end
  redis.register_function{function_name = 'stalkd_' .. name, callback = callback, flags = flags}
end
redis.register_function{function_name = 'stalkd_version', callback = f_version,
                        flags = {'no-writes'}}
local function reg_node(name, fn)
  redis.register_function{function_name = 'stalkd_' .. name, callback = fn,
                          flags = {'no-writes', 'allow-cross-slot-keys'}}
end
reg_node('scan_node', f_scan_node)
reg_node('sum_node', f_sum_node)
reg_node('tubes_node', f_tubes_node)
reg('put', f_put, {})
reg('head', f_head, {'allow-oom'})
reg('reserve', f_reserve, {'allow-oom'})
reg('wait', f_wait, {'allow-oom'}, true)
reg('reserve_job', f_reserve_job, {'allow-oom'})
reg('delete', f_delete, {'allow-oom'})
reg('release', f_release, {'allow-oom'})
reg('bury', f_bury, {'allow-oom'})
reg('touch', f_touch, {'allow-oom'})
reg('kick', f_kick, {'allow-oom'})
reg('kick_job', f_kick_job, {'allow-oom'})
reg('respawn', f_respawn, {'allow-oom'})
reg('peek', f_peek, {'allow-oom'})
reg('peek_state', f_peek_state, {'allow-oom'})
reg('stats_job', f_stats_job, {'allow-oom'})
reg('stats_tube', f_stats_tube, {'allow-oom'})
reg('stats', f_stats, {'allow-oom'})
reg('list_tubes', f_list_tubes, {'allow-oom'})
reg('pause', f_pause, {'allow-oom'})
reg('ref', f_ref, {'allow-oom'}, true)
reg('release_conn', f_release_conn, {'allow-oom'})
reg('pump', f_pump, {'allow-oom'}, true)
reg('lease', f_lease, {'allow-oom'}, true)
reg('quit', f_quit, {'allow-oom'}, true)
reg('purge', f_purge, {'allow-oom'})
reg('list_jobs', f_list_jobs, {'allow-oom'})
reg('tube_tries', f_tube_tries, {}, true)
reg('skip_id', f_skip_id, {'allow-oom'}, true)
