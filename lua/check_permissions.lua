-- Which of the commands redlease's scripts run this user may not run, asked when a client
-- is built so that a missing permission shows at once rather than in the middle of a
-- script (Redis 7's ACL check; nothing is written).
--
-- ARGV[1]  a probe key: command permissions are checked on it
--
-- Returns  the names of the commands refused: empty when every one is allowed, when the
--          server has no ACL check (before Redis 7), or when the probe key is outside the
--          user's key patterns (the check cannot tell then; each script still checks what
--          it can before its first write).
if not redis.acl_check_cmd then
    return {}
end
local key = ARGV[1]
if not redis.acl_check_cmd('exists', key) then
    return {}
end
local checks = {
    {'exists', key}, {'pttl', key}, {'pexpire', key, '1'}, {'del', key}, {'get', key},
    {'set', key, '1', 'px', '1'}, {'incr', key}, {'incrby', key, '1'}, {'decrby', key, '1'}, {'decr', key},
    {'hexists', key, 'f'}, {'hget', key, 'f'}, {'hset', key, 'f', '1'}, {'hincrby', key, 'f', '1'},
    {'hdel', key, 'f'}, {'hkeys', key}, {'hgetall', key}, {'hmget', key, 'f'},
    {'lindex', key, '0'}, {'lpop', key}, {'rpush', key, 'x'}, {'lpos', key, 'x'},
    {'lrem', key, '1', 'x'}, {'lrange', key, '0', '1'}, {'ltrim', key, '0', '1'},
    {'zadd', key, '1', 'x'}, {'zrem', key, 'x'}, {'zscore', key, 'x'}, {'zrange', key, '0', '0'},
    {'zrangebyscore', key, '0', '1'}, {'zremrangebyscore', key, '0', '1'},
    {'time'}, {'info', 'replication'}, {'wait', '1', '1'},
}
local refused = {}
for _, check in ipairs(checks) do
    if not redis.acl_check_cmd(unpack(check)) then
        table.insert(refused, check[1])
    end
end
return refused
