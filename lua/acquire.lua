-- Acquire a reentrant lock (Redisson's layout: a hash of owner -> hold count).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the lock's waiting redlease clients, prefixed("redlease_waiters", name): a
--          sorted set of wake tokens scored by when their registration runs out
-- ARGV[1]  lease in milliseconds (1 ..= 2^53 - 1)
-- ARGV[2]  owner field, "<client uuid>:<thread number>"
-- ARGV[3]  the client's wake token when the caller waits for the lock, else ""
-- ARGV[4]  how long a registration lasts, in milliseconds
-- ARGV[5]  "1" for a reentrant lock; "0" for a non-reentrant one, which refuses a second
--          hold of the same owner with Redisson's error (NON_REENTRANT_REACQUIRE)
--
-- Returns  nil when acquired as the owner's first hold, the status JOINED when the owner
--          held it already (a reentrant hold, or its own earlier grant whose reply was
--          lost); otherwise the lock's PTTL in milliseconds (-1 when the key has no
--          expiry), which bounds how long the caller sleeps before it tries again; an error
--          when a non-reentrant lock's owner asks again.
-- A reentrant hold never shortens the lease: the owner's other holds may need a longer one.
-- A caller that waits registers its client's token when the lock is busy, so that a
-- release wakes that one client rather than one waiter in every client (see release.lua);
-- a grant takes the registration back (the client's other waiters, if any, register again
-- when they next find the lock busy). Both happen before the lock is touched.
local token = ARGV[3]
if redis.call('exists', KEYS[1]) == 0 then
    unregister_waiter(KEYS[2], token)
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    if ARGV[5] == '0' then
        return redis.error_reply('NON_REENTRANT_REACQUIRE')
    end
    unregister_waiter(KEYS[2], token)
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return redis.status_reply('JOINED')
end
register_waiter(KEYS[2], token, ARGV[4])
return redis.call('pttl', KEYS[1])
