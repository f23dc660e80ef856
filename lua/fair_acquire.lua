-- Acquire a fair (FIFO) reentrant lock, or take or keep a place in its queue.
--
-- KEYS[1]  the lock hash (as for the reentrant lock)
-- KEYS[2]  the queue: a list of waiting owners, head first
-- KEYS[3]  the timeouts: a sorted set, owner -> deadline (server epoch ms)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field, "<client uuid>:<thread number>"
-- ARGV[3]  wait timeout in milliseconds: how long a waiter keeps its place between polls
-- ARGV[4]  "1" to queue up when the lock cannot be had, "0" for a single attempt
-- ARGV[5]  the lock's release channel; a waiter's own channel is ARGV[5] .. ':' .. owner
-- ARGV[6]  "1" for a reentrant lock; "0" for a non-reentrant one, which refuses a second
--          hold of the same owner with Redisson's error (NON_REENTRANT_REACQUIRE)
--
-- Returns  nil when acquired as the owner's first hold, the status JOINED when the owner
--          held it already (see acquire.lua); otherwise how many milliseconds
--          the caller may sleep before it polls again: the head of the queue until the
--          holder's lease ends (-1 when the lock has no expiry), any other waiter until
--          the head's deadline, and never longer than the wait timeout.
--
-- Deadlines. The head's deadline is when its turn came (or will come at the latest: the
-- holder's lease end) plus the wait timeout; a head past its deadline is taken for dead
-- and dropped. Whenever a waiter becomes the head, and whenever the lock is freed, the
-- head's deadline is set anew. A freed lock wakes the head alone, to take it (so does a
-- head crowned while the lock is free). A waiter that
-- becomes the head while the lock is held must poll when the holder's lease ends, in case
-- it runs out unreleased: it is told when that is (see `crown`), not woken. A waiter
-- behind the head is not woken: it sleeps until the head's deadline and never longer
-- than the wait timeout, so it polls before any deadline set since its last poll (a freed
-- lock sets the head's to now + the wait timeout) and drops a dead head then. So a dead
-- waiter delays the queue by at most one wait timeout. Behind the head, at the queue's
-- front, deadlines are chained (each the one before it plus the wait timeout, as Redisson
-- keeps them), from the head's whenever a head is crowned (see `chain_front` in the
-- prelude); deeper ones stay as written until they reach the front. A waiter that polls
-- refreshes its deadline, so a live waiter keeps its place however long the holder holds.
-- "Now" is the server's clock, so client clock skew cannot evict live waiters.
local lock, queue, timeouts, channel = KEYS[1], KEYS[2], KEYS[3], ARGV[5]
local owner, wait = ARGV[2], tonumber(ARGV[3])
-- The server's clock, read once and only when a queue needs it: an empty queue and a free
-- lock (the uncontended acquire) take four commands, none of them TIME.
local now = nil
local function clock()
    now = now or server_ms()
    return now
end

-- A new head: its turn comes when the holder's lease ends at the latest. It must poll by
-- then, to take the lock if the lease runs out unreleased (a release wakes it anyway). It
-- polls within one wait timeout of its last poll, which was before now; when the lease
-- ends sooner, it is told when, without being woken: the message -(n + 1) says "the lock
-- is held for n ms more" (a redlease waiter then parks until then at most; Redisson's
-- waiters act on 0 and 1 only, and ignore it). So a hand-off costs no poll of the head.
-- A head crowned while the lock is free (dead heads dropped by a caller behind it) is
-- woken with 0, to take it. The front behind the new head is chained off its deadline.
local function crown()
    local head = redis.call('lindex', queue, 0)
    if head then
        local ttl = redis.call('pttl', lock)
        local deadline = clock() + math.max(ttl, 0) + wait
        redis.call('zadd', timeouts, deadline, head)
        chain_front(queue, timeouts, 1, deadline, wait)
        if ttl == -2 then
            -- The lock is free (a caller behind it dropped dead heads): its turn is now.
            publish(channel .. ':' .. head, '0')
        elseif ttl >= 0 and ttl < wait then
            publish(channel .. ':' .. head, string.format('%d', -(ttl + 1)))
        end
    end
end

-- Waiters' channels are all ARGV[5] .. ':' .. <owner>; an ACL rule that lets this owner
-- publish to its own lets it publish to theirs. Checked before the first write of a path
-- that wakes someone, so that a refusal leaves everything as it was.
local function may_wake()
    may('publish', channel .. ':' .. owner, '0')
end

local purged = false
-- A head's deadline is never more than a wait timeout past the holder's lease: every path
-- that makes or refreshes a head writes it so, Redisson's too, save a Redisson grant that
-- crowns a waiter from deeper than the chained front (see chain_front in the prelude).
-- Such a deadline is brought back (written after the checks that may refuse the script),
-- so that such a head, dead, is dropped within a wait timeout.
local overdue = nil
-- The lock's PTTL as read for a live head, reused below (nothing changes the lock between).
local held_for = nil
local head = redis.call('lindex', queue, 0)
while head do
    local deadline = tonumber(redis.call('zscore', timeouts, head))
    if deadline and deadline > clock() then
        held_for = redis.call('pttl', lock)
        local latest = clock() + math.max(held_for, 0) + wait
        -- The clock and PTTL are whole milliseconds: two readings of the same lease's end
        -- differ by up to one, so a head written at the latest is left as it is.
        if deadline > latest + 2 then
            overdue = latest
        end
        break
    end
    if not purged then
        may_wake()
    end
    redis.call('lpop', queue)
    redis.call('zrem', timeouts, head)
    purged = true
    head = redis.call('lindex', queue, 0)
end

if redis.call('exists', lock) == 0 then
    if not head or head == owner then
        if head then
            may_wake()
        end
        redis.call('hset', lock, owner, 1)
        redis.call('pexpire', lock, ARGV[1])
        if head then
            redis.call('lpop', queue)
            redis.call('zrem', timeouts, owner)
            crown()
        end
        return nil
    end
elseif redis.call('hexists', lock, owner) == 1 then
    if ARGV[6] == '0' then
        if purged then
            crown()
        end
        return redis.error_reply('NON_REENTRANT_REACQUIRE')
    end
    -- A reentrant hold never shortens the lease: the owner's other holds may need longer.
    redis.call('hincrby', lock, owner, 1)
    if redis.call('pttl', lock) < tonumber(ARGV[1]) then
        redis.call('pexpire', lock, ARGV[1])
    end
    return redis.status_reply('JOINED')
end
if purged then
    crown()
end
if overdue then
    redis.call('zadd', timeouts, overdue, head)
end

local ttl = held_for or redis.call('pttl', lock)
if ARGV[4] ~= '1' then
    return math.max(ttl, 0)
end

-- A queued waiter has a deadline; one without is new (a walk of the list to find its place
-- is for the waiters already there, which poll seldom, not for every waiter that joins).
local mine = tonumber(redis.call('zscore', timeouts, owner))
local position = mine and redis.call('lpos', queue, owner)
local ahead
if position then
    ahead = position > 0 and redis.call('lindex', queue, position - 1)
else
    -- A new place at the tail (RPUSH answers the queue's new length), with no deadline yet.
    mine = 0
    position = redis.call('rpush', queue, owner) - 1
    ahead = position > 0 and redis.call('lindex', queue, -2)
end
if position == 0 then
    redis.call('zadd', timeouts, math.max(mine, clock() + math.max(ttl, 0) + wait), owner)
    return ttl
end
local before = tonumber(redis.call('zscore', timeouts, ahead)) or clock()
redis.call('zadd', timeouts, math.max(mine, before + wait), owner)
local head_deadline = before
if position > 1 then
    head_deadline = tonumber(redis.call('zscore', timeouts, redis.call('lindex', queue, 0))) or clock()
end
return math.max(math.min(head_deadline - clock(), wait), 1)
