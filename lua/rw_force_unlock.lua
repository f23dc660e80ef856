-- Delete a read-write lock whoever holds it, if it is in the given mode, and wake every
-- waiter. Per-hold timeout keys of readers expire on their own.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  the mode this handle may delete: "read" or "write"
-- ARGV[2]  the lock's channel (redisson_rwlock:{name})
--
-- Returns  1 when the lock was deleted, 0 when it was absent or in the other mode.
-- The message goes first: a user refused the channel leaves the lock as it was.
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
    publish(ARGV[2], '1')
    redis.call('del', KEYS[1])
    return 1
end
return 0
