-- Acquire a fair (FIFO) reentrant lock, or take or keep a place in its queue.
--
-- KEYS[1]  the lock hash (as for the reentrant lock)
-- KEYS[2]  the queue: a list of waiting owners, head first
-- KEYS[3]  the timeouts: a sorted set, owner -> deadline (server epoch ms) after which a
--          waiter that has not polled again is taken for dead and dropped from the head
-- KEYS[4]  the lock's release channel; a waiter's own channel is KEYS[4] .. ':' .. owner
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field, "<client uuid>:<thread number>"
-- ARGV[3]  wait timeout in milliseconds: how long a waiter keeps its place between polls
-- ARGV[4]  "1" to queue up when the lock cannot be had, "0" for a single attempt
--
-- Returns  nil when acquired (first hold or reentrant); otherwise the milliseconds the
--          caller may sleep before it polls again: until its turn can come at the
--          earliest (the holder's TTL, or the deadline of the waiter before it), or -1
--          when the lock has no expiry.
--
-- Deadlines are chained: a new waiter gets (the tail's deadline, or now + the lock's TTL)
-- + the wait timeout. When a waiter leaves the queue, every deadline behind it moves one
-- wait timeout earlier (never closer than one wait timeout from now), so a dead waiter
-- delays the queue by at most one wait timeout. A waiter that polls refreshes its own
-- deadline, so a live waiter keeps its place however long the holder holds. "Now" is the
-- server's clock, so client clock skew cannot evict live waiters.
--
-- When the head of the queue takes the lock, the next waiter is told that it is now the
-- head: it polls once and from then on sleeps at most the new holder's TTL, so that a
-- holder that dies without releasing costs it one lease, not a queue-length estimate.
local lock, queue, timeouts = KEYS[1], KEYS[2], KEYS[3]
local owner, wait = ARGV[2], tonumber(ARGV[3])
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Drop dead waiters from the head.
while true do
    local head = redis.call('lindex', queue, 0)
    if not head then break end
    local deadline = tonumber(redis.call('zscore', timeouts, head))
    if deadline and deadline > now then break end
    redis.call('lpop', queue)
    redis.call('zrem', timeouts, head)
end

if redis.call('exists', lock) == 0 then
    local head = redis.call('lindex', queue, 0)
    if not head or head == owner then
        if head then
            redis.call('lpop', queue)
            redis.call('zrem', timeouts, owner)
            for _, behind in ipairs(redis.call('lrange', queue, 0, -1)) do
                local deadline = tonumber(redis.call('zscore', timeouts, behind))
                if deadline then
                    redis.call('zadd', timeouts, math.max(deadline - wait, now + wait), behind)
                end
            end
            local next = redis.call('lindex', queue, 0)
            if next then
                redis.call('publish', KEYS[4] .. ':' .. next, 0)
            end
        end
        redis.call('hset', lock, owner, 1)
        redis.call('pexpire', lock, ARGV[1])
        return nil
    end
elseif redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, ARGV[1])
    return nil
end

local ttl = redis.call('pttl', lock)
if ARGV[4] ~= '1' then
    return math.max(ttl, 0)
end

local position = redis.call('lpos', queue, owner)
if not position then
    redis.call('rpush', queue, owner)
    position = redis.call('llen', queue) - 1
end
local mine = tonumber(redis.call('zscore', timeouts, owner)) or 0
if position == 0 then
    -- The head: its turn comes when the lock is released or expires.
    redis.call('zadd', timeouts, math.max(mine, now + math.max(ttl, 0) + wait), owner)
    return ttl
end
local head = redis.call('lindex', queue, 0)
local before = redis.call('lindex', queue, position - 1)
local before_deadline = tonumber(redis.call('zscore', timeouts, before)) or now
local head_deadline = tonumber(redis.call('zscore', timeouts, head)) or now
redis.call('zadd', timeouts, math.max(mine, before_deadline + wait), owner)
return math.max(before_deadline, head_deadline, now + 1) - now
