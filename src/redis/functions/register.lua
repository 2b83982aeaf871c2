-- functions/register.lua: registration: every function as stalkd_<name>, with its flags.
-- One part of stalkd's Redis Functions library: CMakeLists.txt (STALKD_LUA_PARTS)
-- concatenates src/redis/functions/*.lua in this order into the one library Redis loads:
-- common, states, claim, put, reserve, change, reads, tubes, frontends, extensions, node,
-- register.

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
