-- Delete a lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the release channel
-- ARGV[1]  release message ("0")
--
-- Returns  1 when a key was deleted (and the message published), 0 when there was none.
-- The message goes first: a user refused the channel leaves the lock as it was.
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
publish(KEYS[2], ARGV[1])
redis.call('del', KEYS[1])
return 1
