-- Delete a fair lock whoever holds it. As after a release, the head's turn has come: its
-- deadline becomes now + the wait timeout, and it is woken (the waiters behind it poll by
-- their own timers: see fair_acquire.lua).
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue list
-- KEYS[3]  the timeouts sorted set
-- ARGV[1]  release message ("0")
-- ARGV[2]  wait timeout in milliseconds
-- ARGV[3]  the lock's release channel; a waiter's own channel is ARGV[3] .. ':' .. owner
--
-- Returns  1 when a lock was deleted, 0 when there was none.
-- The messages go before the first write: a user refused the channels leaves the lock as
-- it was.
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
local head = redis.call('lindex', KEYS[2], 0)
if head then
    publish(ARGV[3] .. ':' .. head, ARGV[1])
end
redis.call('del', KEYS[1])
if head then
    redis.call('zadd', KEYS[3], server_ms() + tonumber(ARGV[2]), head)
end
return 1
