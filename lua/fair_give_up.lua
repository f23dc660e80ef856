-- A waiter of a fair lock gives up: it leaves the queue, the deadlines behind it move one
-- wait timeout earlier, and the waiters whose place changed in a way that matters are woken
-- (see fair_acquire.lua for the deadline rules).
--
-- KEYS[1]  the lock hash (read for its lease)
-- KEYS[2]  the queue list
-- KEYS[3]  the timeouts sorted set
-- KEYS[4]  the lock's release channel; a waiter's own channel is KEYS[4] .. ':' .. owner
-- ARGV[1]  owner field of the waiter that gives up
-- ARGV[2]  wait timeout in milliseconds
--
-- Returns  1 when the waiter was in the queue, 0 when it was not.
local lock, queue, timeouts, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
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

local function wake(at)
    local waiter = redis.call('lindex', queue, at)
    if waiter then
        redis.call('publish', channel .. ':' .. waiter, 0)
    end
end

if position == 0 then
    -- A new head: its turn comes when the holder's lease ends at the latest.
    local head = redis.call('lindex', queue, 0)
    if head then
        redis.call('zadd', timeouts, now + math.max(redis.call('pttl', lock), 0) + wait, head)
    end
    wake(0)
    wake(1)
elseif position == 1 then
    -- A new second waiter: it must watch the head's deadline.
    wake(1)
end
return 1
