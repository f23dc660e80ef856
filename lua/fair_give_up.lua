-- A waiter of a fair lock gives up: leave the queue, move the deadlines behind it one wait
-- timeout earlier, and, when it was the head, wake the new head (it may take a free lock
-- now, or must learn the holder's TTL).
--
-- KEYS[1]  the lock hash (not touched; named so that every key of the lock is declared)
-- KEYS[2]  the queue list
-- KEYS[3]  the timeouts sorted set
-- KEYS[4]  the lock's release channel; a waiter's own channel is KEYS[4] .. ':' .. owner
-- ARGV[1]  owner field of the waiter that gives up
-- ARGV[2]  wait timeout in milliseconds
--
-- Returns  1 when the waiter was in the queue, 0 when it was not.
local queue, timeouts = KEYS[2], KEYS[3]
local owner, wait = ARGV[1], tonumber(ARGV[2])
local position = redis.call('lpos', queue, owner)
redis.call('zrem', timeouts, owner)
if not position then
    return 0
end
redis.call('lrem', queue, 1, owner)
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, behind in ipairs(redis.call('lrange', queue, position, -1)) do
    local deadline = tonumber(redis.call('zscore', timeouts, behind))
    if deadline then
        redis.call('zadd', timeouts, math.max(deadline - wait, now + wait), behind)
    end
end
if position == 0 then
    local head = redis.call('lindex', queue, 0)
    if head then
        redis.call('publish', KEYS[4] .. ':' .. head, 0)
    end
end
return 1
