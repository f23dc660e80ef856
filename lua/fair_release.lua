-- Release one hold of a fair lock, idempotently per request. When the lock is freed, the
-- head's turn has come: its deadline becomes now + the wait timeout, and it is woken (see
-- fair_acquire.lua for the deadline rules: the waiters behind it poll by their own timers,
-- which the wait timeout bounds). Nobody else wakes.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue list
-- KEYS[3]  the timeouts sorted set
-- KEYS[4]  this request's unlock latch
-- ARGV[1]  release message ("0")
-- ARGV[2]  lease in milliseconds the owner's remaining holds need, when holds remain;
--          0 when the client holds no more: every hold of the owner goes (see release.lua)
-- ARGV[3]  owner field
-- ARGV[4]  latch lifetime in milliseconds
-- ARGV[5]  wait timeout in milliseconds
-- ARGV[6]  the lock's release channel; a waiter's own channel is ARGV[6] .. ':' .. owner
-- ARGV[7]  "1" when this request was sent before with its outcome unknown (its latch may hold the
--          outcome; finding nothing of the owner in a lock nobody else holds is the release
--          having happened), else "0"
--
-- Returns  nil (not held), 0 (one hold released, others remain), 1 (lock freed), 2 (sent
--          before, nothing of the owner in a free lock: see release.lua). A retry
--          of the same request replays a stored 0; after the last hold it finds nothing of
--          this owner and acts on nothing.
-- When the lock is freed, the queue is read first (dead heads, past their deadline, are
-- skipped), the live head is woken, and only then is anything
-- written: a user refused the channels leaves the lock as it was.
local lock, queue, timeouts, channel = KEYS[1], KEYS[2], KEYS[3], ARGV[6]
if ARGV[7] == '1' then
    local replay = redis.call('get', KEYS[4])
    if replay then
        return tonumber(replay)
    end
end
local holds = tonumber(redis.call('hget', lock, ARGV[3]))
if not holds then
    -- Sent before with its outcome unknown: a free lock is this release done (see
    -- release.lua).
    if ARGV[7] == '1' and redis.call('exists', lock) == 0 then
        return 2
    end
    return nil
end
if holds > 1 and ARGV[2] ~= '0' then
    redis.call('hincrby', lock, ARGV[3], -1)
    redis.call('pexpire', lock, ARGV[2])
    redis.call('set', KEYS[4], 0, 'px', ARGV[4])
    return 0
end
-- Freeing a fair lock may have to wake a waiter: the channels are needed whether or not one
-- waits now, so that a user refused them is refused every time, not only under contention.
-- Waiters' channels are all ARGV[6] .. ':' .. <owner>; this owner's stands for them.
may('publish', channel .. ':' .. ARGV[3], ARGV[1])
-- The clock is read only when someone waits: the uncontended release takes three commands.
local dead, head, now = 0, nil, nil
while true do
    local waiter = redis.call('lindex', queue, dead)
    if not waiter then break end
    now = now or server_ms()
    local deadline = tonumber(redis.call('zscore', timeouts, waiter))
    if deadline and deadline > now then
        head = waiter
        break
    end
    dead = dead + 1
end
if head then
    publish(channel .. ':' .. head, ARGV[1])
end
redis.call('del', lock)
if dead > 0 then
    for _, gone in ipairs(redis.call('lrange', queue, 0, dead - 1)) do
        redis.call('zrem', timeouts, gone)
    end
    redis.call('ltrim', queue, dead, -1)
end
if head then
    redis.call('zadd', timeouts, now + tonumber(ARGV[5]), head)
end
return 1
