-- Release one read hold of a read-write lock, idempotently per request.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's channel (redisson_rwlock:{name})
-- KEYS[3]  prefix of this owner's per-hold timeout keys (hold k is KEYS[3] .. ':' .. k)
-- KEYS[4]  prefix of every owner's timeout keys: "<KEYS[4]><owner>:rwlock_timeout:<k>"
-- KEYS[5]  this request's unlock latch
-- ARGV[1]  release message ("0": a waiter may now write)
-- ARGV[2]  owner field
-- ARGV[3]  latch lifetime in milliseconds
--
-- Returns  nil (this owner holds no read hold), 0 (released; the lock is still held),
--          1 (released; the lock is free and the message was published). While this owner
--          keeps read holds the outcome is stored in the latch, and a retry of the same
--          request replays it; after its last read hold a retry finds nothing of it.
-- In read mode the hash's lease becomes the longest remaining lease of the read holds
-- left; holds whose timeout key expired (dead readers) count for nothing, and when none is
-- left the lock is deleted. In write mode (this owner's downgrade) the writer's lease stays.
local replay = redis.call('get', KEYS[5])
if replay then
    return tonumber(replay)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if left == 0 then
    redis.call('hdel', KEYS[1], ARGV[2])
end
redis.call('del', KEYS[3] .. ':' .. (left + 1))
local outcome = 1
if redis.call('hget', KEYS[1], 'mode') == 'write' then
    outcome = 0
else
    local longest = -3
    for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
        local holds = tonumber(redis.call('hget', KEYS[1], field))
        if holds and string.sub(field, -6) ~= ':write' then
            for k = 1, holds do
                longest = math.max(longest, redis.call('pttl', KEYS[4] .. field .. ':rwlock_timeout:' .. k))
            end
        end
    end
    if longest > 0 then
        redis.call('pexpire', KEYS[1], longest)
        outcome = 0
    else
        redis.call('del', KEYS[1])
        redis.call('publish', KEYS[2], ARGV[1])
    end
end
if left > 0 then
    redis.call('set', KEYS[5], outcome, 'px', ARGV[3])
end
return outcome
