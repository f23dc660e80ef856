-- Release one write hold of a read-write lock, idempotently per request.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  this request's unlock latch
-- ARGV[1]  release message ("1": every waiting reader may enter)
-- ARGV[2]  lease in milliseconds the owner's remaining write holds need, when some remain
--          (the hash keeps the longer of it and the owner's downgraded read holds' leases);
--          0 when the client holds no more: every write hold of the owner goes (see
--          release.lua)
-- ARGV[3]  the owner's write field, "<owner>:write"
-- ARGV[4]  latch lifetime in milliseconds
-- ARGV[5]  the owner's read field, "<owner>"
-- ARGV[6]  the lock's channel (redisson_rwlock:{name})
-- ARGV[7]  prefix of this owner's per-hold read timeout keys (hold k is ARGV[7] .. ':' .. k)
-- ARGV[8]  "1" when this request was sent before with its outcome unknown (its latch may hold the
--          outcome; finding nothing of the owner in a lock nobody else holds is the release
--          having happened), else "0"
--
-- Returns  nil (not held), 0 (one write hold released, others remain), 1 (the last write
--          hold released: the lock is deleted, or, when this owner still has read holds
--          (a downgrade), left in read mode with the longest lease of those holds; the
--          message is published either way), 2 (sent before, nothing of the owner in a
--          free lock: see release.lua).
-- Only a release that leaves write holds stores its outcome in the latch; after the last
-- one a retry finds no write field of this owner and acts on nothing. The message goes
-- before the first write: a user refused the channel leaves the lock as it was.
if ARGV[8] == '1' then
    local replay = redis.call('get', KEYS[2])
    if replay then
        return tonumber(replay)
    end
end
-- One HMGET reads the mode, this owner's write holds and its read holds.
local found = redis.call('hmget', KEYS[1], 'mode', ARGV[3], ARGV[5])
if found[1] ~= 'write' then
    -- Sent before with its outcome unknown: a free lock is this release done (see
    -- release.lua).
    if ARGV[8] == '1' and not found[1] then
        return 2
    end
    return nil
end
local holds = tonumber(found[2])
if not holds then
    return nil
end
-- In write mode only this owner can have read holds (its downgrade): they share the hash,
-- and its lease must cover them too.
local reads = tonumber(found[3]) or 0
local longest = -3
for k = 1, reads do
    longest = math.max(longest, redis.call('pttl', ARGV[7] .. ':' .. k))
end
if holds > 1 and ARGV[2] ~= '0' then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], math.max(tonumber(ARGV[2]), longest))
    redis.call('set', KEYS[2], 0, 'px', ARGV[4])
    return 0
end
publish(ARGV[6], ARGV[1])
if longest > 0 then
    redis.call('hdel', KEYS[1], ARGV[3])
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('pexpire', KEYS[1], longest)
else
    redis.call('del', KEYS[1])
end
return 1
