-- Release one write hold of a read-write lock, idempotently per request.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's channel (redisson_rwlock:{name})
-- KEYS[3]  this request's unlock latch
-- ARGV[1]  release message ("1": every waiting reader may enter)
-- ARGV[2]  lease in milliseconds to keep when write holds remain
-- ARGV[3]  the owner's write field, "<owner>:write"
-- ARGV[4]  latch lifetime in milliseconds
--
-- Returns  nil (not held), 0 (one write hold released, others remain), 1 (the last write
--          hold released: the lock is deleted, or, when this owner still has read holds
--          (a downgrade), left in read mode; the message is published either way).
-- Only a release that leaves write holds stores its outcome in the latch; after the last
-- one a retry finds no write field of this owner and acts on nothing.
local replay = redis.call('get', KEYS[3])
if replay then
    return tonumber(replay)
end
if redis.call('hget', KEYS[1], 'mode') ~= 'write' or redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if left > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[4])
    return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call('publish', KEYS[2], ARGV[1])
return 1
