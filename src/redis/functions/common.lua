#!lua name=stalkd
-- functions/common.lua: the library's head: its name line, the key layout, constants, numbers and
-- the clock, the timer set, job records, counters, and tubes' existence and order.
-- One part of stalkd's Redis Functions library: CMakeLists.txt (STALKD_LUA_PARTS)
-- concatenates src/redis/functions/*.lua in this order into the one library Redis loads:
-- common, states, claim, put, reserve, change, reads, tubes, frontends, extensions, node,
-- register.

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
