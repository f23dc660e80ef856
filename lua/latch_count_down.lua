-- Count a count-down latch down by one (Redisson's RCountDownLatch): at zero the latch is
-- deleted and "0" is published on redisson_countdownlatch__channel__{name}, which opens it
-- for every waiter.
--
-- KEYS[1]  the latch
-- ARGV[1]  its channel
--
-- Returns  the count left (0 when the latch opened or was already open). The message goes
--          before the write: a user refused the channel changes nothing.
local count = tonumber(redis.call('get', KEYS[1]))
if not count or count <= 1 then
    if count == 1 then
        publish(ARGV[1], 0)
    end
    redis.call('del', KEYS[1])
    return 0
end
redis.call('decr', KEYS[1])
return count - 1
