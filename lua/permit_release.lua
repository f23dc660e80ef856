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
--          it) or given back before; one past its deadline was lost even though it is
--          returned now. Everything is read first and the message goes before the writes:
--          a user refused the channel changes nothing.
local now = server_ms()
local live, late, gone = 0, 0, 0
local present = {}
for i = 2, #ARGV do
    local deadline = redis.call('zscore', KEYS[2], ARGV[i])
    if deadline then
        table.insert(present, ARGV[i])
        if tonumber(deadline) > now then
            live = live + 1
        else
            late = late + 1
        end
    else
        gone = gone + 1
    end
end
if #present > 0 then
    publish(ARGV[1], (tonumber(redis.call('get', KEYS[1])) or 0) + #present)
    for _, id in ipairs(present) do
        redis.call('zrem', KEYS[2], id)
    end
    redis.call('incrby', KEYS[1], #present)
end
return {live, late, gone}
