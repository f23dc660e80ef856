-- Delete a lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  the lock key
-- ARGV[1]  release message ("0"), or "" for a lock without messages (the spin lock)
-- ARGV[2]  the release channel
--
-- Returns  1 when a key was deleted (and the message published), 0 when there was none.
-- The message goes first: a user refused the channel leaves the lock as it was.
if redis.call('exists', KEYS[1]) == 0 then
    return 0
end
if ARGV[1] ~= '' then
    publish(ARGV[2], ARGV[1])
end
redis.call('del', KEYS[1])
return 1
