-- Give permits back to a semaphore, or add new ones, and tell the waiters how many are
-- available now (Redisson's message on redisson_sc:{name}).
--
-- KEYS[1]  the semaphore
-- ARGV[1]  permits given back or added (may be negative when taking permits away)
-- ARGV[2]  the semaphore's channel
-- ARGV[3]  "1" to give back only to a semaphore that exists (Redisson's releaseIfExists),
--          else "0"
--
-- Returns  the number of permits available now (nil, and nothing done, for a semaphore
--          that does not exist when ARGV[3] says so). The message goes before the write (nobody
--          can observe the order inside a script): a user refused the channel changes
--          nothing.
if ARGV[3] == '1' and redis.call('exists', KEYS[1]) == 0 then
    return nil
end
local available = (tonumber(redis.call('get', KEYS[1])) or 0) + tonumber(ARGV[1])
publish(ARGV[2], available)
redis.call('incrby', KEYS[1], ARGV[1])
return available
