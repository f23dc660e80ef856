-- Set a count-down latch's count when it has none (Redisson's trySetCount), and publish
-- "1" (a new count) on its channel.
--
-- KEYS[1]  the latch
-- ARGV[1]  the count (at least 1)
-- ARGV[2]  its channel
--
-- Returns  1 when set, 0 when the latch already had a count.
if redis.call('exists', KEYS[1]) == 1 then
    return 0
end
may('publish', ARGV[2], '1')
redis.call('set', KEYS[1], ARGV[1])
publish(ARGV[2], 1)
return 1
