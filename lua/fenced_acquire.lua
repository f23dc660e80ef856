-- Acquire a fenced lock: a reentrant lock whose every grant, reentrant ones included,
-- takes the next value of a counter that never expires (the fencing token).
--
-- KEYS[1]  the lock hash (as for the reentrant lock)
-- KEYS[2]  the token counter, prefixed("redisson_lock_token", name); no TTL
-- KEYS[3]  the lock's waiting redlease clients (as for the reentrant lock)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field, "<client uuid>:<thread number>"
-- ARGV[3]  the client's wake token when the caller waits for the lock, else ""
-- ARGV[4]  how long a registration lasts, in milliseconds
--
-- Returns  {1, token} when acquired as the owner's first hold, {2, token} when the owner
--          held it already (see acquire.lua); {0, pttl} when someone else holds the lock
--          (pttl is -1 when the key has no expiry).
-- A reentrant hold never shortens the lease: the owner's other holds may need a longer one.
-- A waiting caller registers and a grant unregisters as in acquire.lua.
local token = ARGV[3]
if redis.call('exists', KEYS[1]) == 0 then
    may('incr', KEYS[2])
    unregister_waiter(KEYS[3], token)
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, redis.call('incr', KEYS[2])}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    may('incr', KEYS[2])
    unregister_waiter(KEYS[3], token)
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return {2, redis.call('incr', KEYS[2])}
end
register_waiter(KEYS[3], token, ARGV[4])
return {0, redis.call('pttl', KEYS[1])}
