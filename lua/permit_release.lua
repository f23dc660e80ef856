-- Give back permits of a permit-expirable semaphore by their ids, and tell the waiters how
-- many are available now.
--
-- KEYS[1]  the semaphore
-- KEYS[2]  its timeouts sorted set
-- ARGV[1]  the semaphore's channel
-- ARGV[2..] the permits' ids
--
-- Returns  {returned in time, returned past their deadline, not there}: a permit that was
--          not there had already been taken back (its deadline passed and someone reclaimed
--          it); one past its deadline was lost even though it is returned now.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
may('publish', ARGV[1], '0')
local live, late, gone = 0, 0, 0
for i = 2, #ARGV do
    local deadline = redis.call('zscore', KEYS[2], ARGV[i])
    if deadline then
        redis.call('zrem', KEYS[2], ARGV[i])
        if tonumber(deadline) > now then
            live = live + 1
        else
            late = late + 1
        end
    else
        gone = gone + 1
    end
end
if live + late > 0 then
    local available = redis.call('incrby', KEYS[1], live + late)
    publish(ARGV[1], available)
end
return {live, late, gone}
