-- Count a count-down latch down by one (Redisson's RCountDownLatch): at zero the latch is
-- deleted and "0" is published on redisson_countdownlatch__channel__{name}, which opens it
-- for every waiter.
--
-- KEYS[1]  the latch
-- ARGV[1]  its channel
--
-- Returns  the count left (0 when the latch opened or was already open).
may('publish', ARGV[1], '0')
local left = redis.call('decr', KEYS[1])
if left <= 0 then
    redis.call('del', KEYS[1])
end
if left == 0 then
    publish(ARGV[1], 0)
end
return math.max(left, 0)
