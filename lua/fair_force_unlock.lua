-- Delete a fair lock whoever holds it, and wake the waiter whose turn it is.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue list
-- KEYS[3]  the lock's release channel; a waiter's own channel is KEYS[3] .. ':' .. owner
-- ARGV[1]  release message ("0")
--
-- Returns  1 when a lock was deleted, 0 when there was none.
if redis.call('del', KEYS[1]) == 0 then
    return 0
end
local head = redis.call('lindex', KEYS[2], 0)
if head then
    redis.call('publish', KEYS[3] .. ':' .. head, ARGV[1])
end
return 1
