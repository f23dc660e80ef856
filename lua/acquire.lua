-- Acquire a reentrant lock (Redisson's layout: a hash of owner -> hold count).
--
-- KEYS[1]  the lock hash
-- ARGV[1]  lease in milliseconds (1 ..= 2^53 - 1)
-- ARGV[2]  owner field, "<client uuid>:<thread number>"
--
-- Returns  nil when acquired (first hold or a reentrant one); otherwise the lock's
--          PTTL in milliseconds (-1 when the key has no expiry), which bounds how long
--          the caller sleeps before it tries again.
-- A reentrant hold never shortens the lease: the owner's other holds may need a longer one.
if redis.call('exists', KEYS[1]) == 0 then
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return nil
end
return redis.call('pttl', KEYS[1])
