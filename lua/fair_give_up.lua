-- A waiter of a fair lock gives up: it leaves the queue, the queue's front behind it closes
-- up (chained anew, see chain_front in the prelude), and when it was the head the new head
-- is woken, since the lock may be free for it (see fair_acquire.lua for the deadline rules).
--
-- KEYS[1]  the lock hash (read for its lease)
-- KEYS[2]  the queue list
-- KEYS[3]  the timeouts sorted set
-- ARGV[1]  owner field of the waiter that gives up
-- ARGV[2]  wait timeout in milliseconds
-- ARGV[3]  the lock's release channel; a waiter's own channel is ARGV[3] .. ':' .. owner
--
-- Returns  1 when the waiter was in the queue, 0 when it was not.
-- Leaving must not fail: a waiter that stayed queued would hold up everyone behind it until
-- its deadline. So a wake-up that Redis refuses (a user without the channels, which is
-- often why the waiter gives up) is skipped; the waiters it was for poll on their own.
local lock, queue, timeouts, channel = KEYS[1], KEYS[2], KEYS[3], ARGV[3]
local owner, wait = ARGV[1], tonumber(ARGV[2])
local position = redis.call('lpos', queue, owner)
if not position then
    redis.call('zrem', timeouts, owner)
    return 0
end
-- Leaving the head makes a new head, which may find the lock free. The others poll by
-- their own timers, which the wait timeout bounds.
if position == 0 then
    local head = redis.call('lindex', queue, 1)
    if head then
        redis.pcall('publish', channel .. ':' .. head, 0)
    end
end
redis.call('zrem', timeouts, owner)
redis.call('lrem', queue, 1, owner)
if position == 0 then
    -- A new head: its turn comes when the holder's lease ends at the latest.
    local head = redis.call('lindex', queue, 0)
    if head then
        local deadline = server_ms() + math.max(redis.call('pttl', lock), 0) + wait
        redis.call('zadd', timeouts, deadline, head)
        chain_front(queue, timeouts, 1, deadline, wait)
    end
elseif position < FAIR_FRONT then
    -- The front behind the one ahead of the leaver closes up (see chain_front).
    local ahead = tonumber(redis.call('zscore', timeouts, redis.call('lindex', queue, position - 1)))
    if ahead then
        chain_front(queue, timeouts, position, ahead, wait)
    end
end
return 1
