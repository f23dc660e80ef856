-- Set a semaphore's permits when it has none set yet (Redisson's trySetPermits).
--
-- KEYS[1]  the semaphore
-- ARGV[1]  permits
-- ARGV[2]  the semaphore's channel
-- ARGV[3]  how long the permits last, in milliseconds (Redisson's trySetPermits with a
--          time to live), or "" for ever
--
-- Returns  1 when set (and waiters told), 0 when the semaphore already had a count.
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
may('publish', ARGV[2], ARGV[1])
if ARGV[3] == '' then
    redis.call('set', KEYS[1], ARGV[1])
else
    redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
end
publish(ARGV[2], ARGV[1])
return 1
