-- Take the write hold of a read-write lock (Redisson's layout).
--
-- KEYS[1]  the lock hash
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the owner's write field, "<owner>:write"
--
-- Returns  nil when granted on a free lock, the status JOINED when this owner already
--          holds the write lock (reentrant, or its own grant whose reply was lost);
--          otherwise the lock's PTTL (-1 when it has no expiry).
-- A reentrant hold never shortens the lease: the owner's other holds may need a longer one.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return redis.status_reply('JOINED')
end
return redis.call('pttl', KEYS[1])
