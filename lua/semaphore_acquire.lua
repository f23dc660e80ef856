-- Take permits of a semaphore (Redisson's RSemaphore layout: the key holds the number of
-- permits available).
--
-- KEYS[1]  the semaphore
-- ARGV[1]  permits wanted (at least 1)
--
-- Returns  nil when taken; otherwise the number of permits available now.
local available = tonumber(redis.call('get', KEYS[1]))
if available and available >= tonumber(ARGV[1]) then
    redis.call('decrby', KEYS[1], ARGV[1])
    return nil
end
return available or 0
