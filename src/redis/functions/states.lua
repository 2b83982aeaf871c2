-- functions/states.lua: a job's moves between states (enter, leave, drop, expire, the end of a
-- reservation) and the timer work that is due (apply_due, next_due).
-- One part of stalkd's Redis Functions library: CMakeLists.txt (STALKD_LUA_PARTS)
-- concatenates src/redis/functions/*.lua in this order into the one library Redis loads:
-- common, states, claim, put, reserve, change, reads, tubes, frontends, extensions, node,
-- register.

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
