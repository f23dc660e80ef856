-- Delete a lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the release channel
-- ARGV[1]  release message ("0")
--
-- Returns  1 when a key was deleted (and the message published), 0 when there was none.
if redis.call('del', KEYS[1]) == 1 then
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
return 0
