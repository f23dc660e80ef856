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
-- waiter delays the queue by at most one wait timeout. Behind the head, deadlines are
-- chained (each the one before it plus the wait timeout, as Redisson keeps them) and move
-- one wait timeout earlier whenever a waiter ahead leaves. A waiter that polls refreshes
-- its deadline, so a live waiter keeps its place however long the holder holds. "Now" is
-- the server's clock, so client clock skew cannot evict live waiters.
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
-- woken with 0, to take it.
local function crown()
    local head = redis.call('lindex', queue, 0)
    if head then
        local ttl = redis.call('pttl', lock)
        redis.call('zadd', timeouts, clock() + math.max(ttl, 0) + wait, head)
        if ttl == -2 then
            -- The lock is free (a caller behind it dropped dead heads): its turn is now.
            publish(channel .. ':' .. head, '0')
        elseif ttl >= 0 and ttl < wait then
            publish(channel .. ':' .. head, string.format('%d', -(ttl + 1)))
        end
    end
end

-- The head took the lock: every waiter behind it moves one wait timeout earlier (never
-- closer than one wait timeout from now), as Redisson keeps the chain. Read with one ZRANGE
-- and written with one ZADD per thousand waiters, rather than two commands per waiter, so
-- that a grant costs Redis about the same however long the queue.
local function move_up()
    local scored = redis.call('zrange', timeouts, 0, -1, 'withscores')
    local floor = clock() + wait
    local batch = {}
    for at = 1, #scored, 2 do
        batch[#batch + 1] = string.format('%d', math.max(tonumber(scored[at + 1]) - wait, floor))
        batch[#batch + 1] = scored[at]
        if #batch == 2000 then
            redis.call('zadd', timeouts, unpack(batch))
            batch = {}
        end
    end
    if #batch > 0 then
        redis.call('zadd', timeouts, unpack(batch))
    end
end

-- Waiters' channels are all ARGV[5] .. ':' .. <owner>; an ACL rule that lets this owner
-- publish to its own lets it publish to theirs. Checked before the first write of a path
-- that wakes someone, so that a refusal leaves everything as it was.
local function may_wake()
    may('publish', channel .. ':' .. owner, '0')
end

local purged = false
local head = redis.call('lindex', queue, 0)
while head do
    local deadline = tonumber(redis.call('zscore', timeouts, head))
    if deadline and deadline > clock() then break end
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
            move_up()
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

local ttl = redis.call('pttl', lock)
if ARGV[4] ~= '1' then
    return math.max(ttl, 0)
end

local position = redis.call('lpos', queue, owner)
local mine = 0
if position then
    mine = tonumber(redis.call('zscore', timeouts, owner)) or 0
else
    -- A new place at the tail (RPUSH answers the queue's new length), with no deadline yet.
    position = redis.call('rpush', queue, owner) - 1
end
if position == 0 then
    redis.call('zadd', timeouts, math.max(mine, clock() + math.max(ttl, 0) + wait), owner)
    return ttl
end
local before = tonumber(redis.call('zscore', timeouts, redis.call('lindex', queue, position - 1))) or clock()
redis.call('zadd', timeouts, math.max(mine, before + wait), owner)
local head_deadline = before
if position > 1 then
    head_deadline = tonumber(redis.call('zscore', timeouts, redis.call('lindex', queue, 0))) or clock()
end
return math.max(math.min(head_deadline - clock(), wait), 1)
