-- Give permits back to a semaphore, or add new ones, and tell the waiters how many are
-- available now (Redisson's message on redisson_sc:{name}).
--
-- KEYS[1]  the semaphore
-- ARGV[1]  permits given back or added (may be negative when taking permits away)
-- ARGV[2]  the semaphore's channel
--
-- Returns  the number of permits available now. A user refused the channel is refused
--          before anything is written.
may('publish', ARGV[2], ARGV[1])
local available = redis.call('incrby', KEYS[1], ARGV[1])
publish(ARGV[2], available)
return available
