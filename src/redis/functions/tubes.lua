-- functions/tubes.lua: a tube's pause, and a front end's references to tubes (ref).
-- One part of stalkd's Redis Functions library: CMakeLists.txt (STALKD_LUA_PARTS)
-- concatenates src/redis/functions/*.lua in this order into the one library Redis loads:
-- common, states, claim, put, reserve, change, reads, tubes, frontends, extensions, node,
-- register.

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
